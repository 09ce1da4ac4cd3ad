"""Register-blocked micro-kernels: which loops form the outer product, and which `mr x nr` tiles fit the target.

A BLAS micro-kernel (GotoBLAS, BLIS, oneDNN) keeps an `mr x nr` block of
the output in vector registers while the reduction loop runs innermost: each
step loads `nr / lanes` vectors of the `B` panel, broadcasts `mr` scalars of
`A` and issues `mr * nr / lanes` independent FMAs. The block is as large as
the register file allows (accumulators, plus the `B` vectors and one
broadcast) and large enough to hide the FMA latency (at least half the file
in accumulators: 8 ymm with AVX2, 16 zmm with AVX-512, where two FMA ports
of 4-cycle latency need 8 independent chains). Everything here reads loop
structure and the target's register file, never operator names.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from ansor_mlir.core.schedule import Family, MicroKernel, Sketch, TileKnob, micro_kernel_shape, tile_knobs
from ansor_mlir.core.target import Target
from ansor_mlir.space.dag import Dag, operands_along, output_dims, unit_register_dims, vector_loop
from ansor_mlir.space.decisions import FUSION, MAX_K_UNROLL
from ansor_mlir.space.limits import limits
from ansor_mlir.space.resolved import Resolved

# The register tile's vectors of B in one row (nr / lanes), powers of two only: wider rows leave too few rows for
# reuse of B, and LLVM widens a row of 3 vectors (`vector<24xf32>` with AVX2) to 4 and shuffles it back: on Zen 3
# a 4x24 Dense(288,800,672) kernel's loop held 168 shuffles and 91 spill pairs and ran 3-5x slower than 6x16, in
# both families.
ROW_VECTORS = (1, 2, 4)
# Vector registers a micro-kernel needs besides its accumulators and B vectors: one broadcast of A.
BROADCAST_REGISTERS = 1
# The least reduction steps a cache tile gives a micro-kernel (`kc`; less only where the knob's largest tile is
# less): the accumulators are loaded and stored once per cache tile, 2 memory operations per `kc` FMAs of each
# (a grouped conv's implicit GEMM with `kc = 1` stored its 8 accumulators beside its 8 FMAs; BLAS libraries
# use `kc` in the hundreds).
MIN_CACHE_K = 16


def reduction_knob(sketch: Sketch, k: int) -> TileKnob | None:
    """The tile knob of the root's innermost reduction loop `k` (None where it is not a knob)."""
    return next((knob for knob in tile_knobs(sketch.knobs) if knob.of_root and knob.dim == k), None)


def least_cache_k(knob: TileKnob) -> int:
    """The least cache tile of a micro-kernel's innermost reduction loop (`MIN_CACHE_K`, or the knob's largest
    tile: an implicit GEMM's K tiles divide the input channels)."""
    return min(MIN_CACHE_K, knob.outer_bound)


@dataclass(frozen=True)
class MicroKernelLoops:
    """The root's loops a micro-kernel tiles: `rows` (reuse of the B vectors), `cols` (the vector loop) and the
    innermost reduction loop `k`."""

    rows: int
    cols: int
    k: int
    # `rows` is a window loop (`unit_register_dims`): its rows are unrolled, not vectorized.
    unrolled: bool = False


def micro_kernel_loops(dag: Dag, packed: bool = False, window_rows: bool = False) -> MicroKernelLoops | None:
    """The outer-product loops of a contraction root, None when it has none.

    `cols` is the output's vector loop, which every input it indexes must read
    contiguously (a transposed `B` is the packing rule's); `rows` is the
    innermost other parallel loop of the output that some input does not read
    (the broadcast side: `B` is reused across it) and some input does; `k` the
    innermost reduction loop. None of them may be a loop the register tile
    keeps unit (`unit_register_dims`: strided or dilated windows), so a
    stride-1 convolution is an implicit GEMM (output pixels of a row x output
    channels, over input channels; its window loops unit and folded). With
    `packed`, inputs read across `cols` are allowed: the sketch packs them into
    `[k, nr]` panels first (`Pack`). With `window_rows`, `rows` is instead a
    window loop (the output pixels of a strided or dilated convolution, read
    as `2 * ow + kw`): the direct convolution's micro-kernel, whose rows the
    strategy unrolls (each a broadcast input scalar per reduction step).
    """
    if not dag.is_contraction():
        return None
    root = dag.ops[dag.root]
    outputs = output_dims(root)
    if not root.reduction_dims or not outputs or outputs[-1] is None:
        return None
    forced = unit_register_dims(root)
    cols, k = vector_loop(root), root.reduction_dims[-1]
    across = any(dims[-1] != [cols] for i, dims in operands_along(root, cols) if i < root.num_inputs)
    if {cols, k} & forced or (across and not packed):
        return None
    inputs = root.indexing_maps[: root.num_inputs]
    for d in reversed([d for d in outputs if d is not None and d != cols and (d in forced) == window_rows]):
        if root.extents[d] > 1 and any(d not in m.dims() for m in inputs) and any(d in m.dims() for m in inputs):
            return MicroKernelLoops(d, cols, k, unrolled=window_rows)
    return None


def tight(mr: int, vectors: int, target: Target) -> bool:
    """An `mr x (vectors * lanes)` tile leaves at most one register spare: its reduction loop cannot be unrolled."""
    return mr * vectors + vectors + BROADCAST_REGISTERS + 1 >= target.vector_registers


def unroll_limit(mr: int, vectors: int, target: Target, window_whole_k: bool = False) -> int:
    """The largest reduction unroll an `mr x (vectors * lanes)` register tile keeps spill-free: 1 for a tight
    tile (`tight`), whose unrolled steps' `B` vectors LLVM loads ahead together (6x16 with `k` unrolled 2
    spilled 17 times per iteration on AVX2), else `MAX_K_UNROLL`.

    `window_whole_k` (a window micro-kernel whose short innermost reduction
    loop is unrolled whole) keeps the tight tiles: C3D's 6x16 tiles with its 3
    input channels unrolled compile to 36 FMAs, 6 filter loads and 18
    broadcasts with no spill for `znver3` and `haswell`, 14x32 to 84 FMAs with
    none for `sapphirerapids`, and on Zen 3 the 6x16 tile with the whole
    window in the cache tile ran 1.11x the best 2x32 tiling. For `znver4`
    LLVM's schedule spills 7-9 zmm per 84 FMAs of the 14x32 tile; there the
    measurement, not this limit, ranks it.
    """
    return MAX_K_UNROLL if window_whole_k or not tight(mr, vectors, target) else 1


def whole_k_unroll(dag: Dag) -> int:
    """The unroll a micro-kernel's innermost reduction loop always gets: its whole extent when it is at most
    `MAX_K_UNROLL` (`decisions.micro_kernel_steps`), else 1 (a knob)."""
    extent = dag.ops[dag.root].extents[dag.ops[dag.root].reduction_dims[-1]]
    return extent if extent <= MAX_K_UNROLL else 1


def register_shapes(
    rows_extent: int, cols_extent: int, target: Target, element_bytes: int, peel: bool = False, k_unroll: int = 1,
    window_rows: bool = False,
) -> tuple[str, ...]:
    """`MRxNR` register tiles of the target: accumulators plus one row of B vectors (`ROW_VECTORS`) and a broadcast
    fit the vector register file, at least half of it is accumulators, `nr` divides its loop (smallest `nr` first).

    `mr` divides its loop too, or, with `peel`, is the largest that fits with
    one register to spare for rows of two or more vectors (6x16 with AVX2's 16
    ymm, 14x32 with 32 zmm, over 512 rows): the strategy peels the last
    partial row tile (`loop.peel`). On this Xeon's AVX2 code 6x16 ran 1.13x
    faster than 4x16, the largest divisor shape. A `k_unroll` above 1 (a short
    reduction loop unrolled whole) leaves out the shapes whose `unroll_limit`
    it exceeds (the tight ones, unless the rows are a window loop).
    """
    lanes = target.vector_lanes(element_bytes)
    registers = target.vector_registers
    # The accumulator budget annotation checks (`limits`): a shape beyond it would be offered and never valid
    # (14x8 on AVX2 holds 14 of 16 ymm; where it was allowed it spilled 13 accumulators in some tilings).
    accumulator_bytes = limits(target).accumulator_bytes
    shapes = []
    for vectors in ROW_VECTORS:
        nr = vectors * lanes
        if cols_extent % nr:
            continue
        fitting = [mr for mr in range(1, rows_extent + 1)
                   if 2 * mr * vectors >= registers and mr * vectors + vectors + BROADCAST_REGISTERS <= registers
                   and mr * nr * element_bytes <= accumulator_bytes
                   and k_unroll <= unroll_limit(mr, vectors, target, window_rows and k_unroll > 1)]
        shapes += [f"{mr}x{nr}" for mr in fitting if rows_extent % mr == 0]
        spare = [mr for mr in fitting if (mr * vectors + vectors + BROADCAST_REGISTERS) < registers]
        if peel and vectors > 1 and spare and rows_extent % spare[-1]:
            shapes.append(f"{spare[-1]}x{nr}")
    return tuple(shapes)


def peeled_rows(resolved: Resolved) -> int | None:
    """The root's row loop when its register tile does not divide the tile above (the last row tile is peeled),
    else None."""
    step = resolved.sketch.step(MicroKernel)
    if not isinstance(step, MicroKernel):
        return None
    mr = resolved.register[step.rows]
    return step.rows if resolved.above_register[step.rows] % mr else None


def micro_kernel_fits(resolved: Resolved, target: Target) -> bool:
    """Every cache and workgroup tile holds whole `nr` columns and at least one `mr`-row tile, whole ones unless
    the shape is a peeled one (`peeled_rows`, where the strategy can peel: a chain of ops fused into the
    register tile, or none after the root), the cache tile gives the innermost reduction loop at least
    `MIN_CACHE_K` steps, and the reduction unroll is within `unroll_limit`: none for an ordinary shape with a
    single register to spare (6x16 with k unrolled 2 spilled 17 times per iteration on AVX2 and ran 0.72x
    IREE's default, unrolled 1 it ran 1.13x; 14x32 unrolled 4 spilled 24 times on AVX-512)."""
    step = resolved.sketch.step(MicroKernel)
    assert isinstance(step, MicroKernel)
    (knob,) = step.knobs
    mr, nr = micro_kernel_shape(resolved.candidate.choice(knob) or knob.options[0])
    above = resolved.above_register
    workgroup = [size or extent for size, extent in zip(
        resolved.per_level.get("distribution", [0] * len(above)), resolved.extents, strict=True)]
    for tiles in (above, workgroup):
        if tiles[step.cols] % nr or tiles[step.rows] < mr:
            return False
    if peeled_rows(resolved) is not None and not peelable(resolved):
        return False
    reduction = [d for d, it in enumerate(resolved.iterator_types) if it == "reduction"]
    k_knob = reduction_knob(resolved.sketch, reduction[-1])
    if k_knob is not None and len(k_knob.levels) > 1 and above[reduction[-1]] < least_cache_k(k_knob):
        return False
    unroll = prod(resolved.register[d] for d in reduction)
    vectors = nr // target.vector_lanes(resolved.task.root.element_bytes)
    # No knob on the innermost reduction loop: it is unrolled whole (`decisions.micro_kernel_steps`).
    return unroll <= unroll_limit(mr, vectors, target, step.unrolled and k_knob is None)


def peelable(resolved: Resolved) -> bool:
    """A transform strategy can peel the partial row tile: nothing runs after the root, or its consumers are
    fused into the register tile as a chain with only fills before the root (the peeled loops' ops are read
    back in the order fusion placed them: fills, root, consumers)."""
    dag = resolved.dag
    if resolved.sketch.family is not Family.TRANSFORM or dag is None:
        return False
    if not dag.consumers:
        return True
    only_fills = all(dag.ops[i].is_fill for i in range(dag.root))
    chain = all(c - 1 in dag.ops[c].producers for c in dag.consumers)
    return only_fills and chain and resolved.choice(FUSION) == "inner"

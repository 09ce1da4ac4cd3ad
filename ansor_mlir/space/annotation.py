"""Annotation: fill a sketch's holes by random sampling, rejecting invalid programs.

All randomness comes from the `random.Random` passed in, so the same seed
gives the same candidates. Constraints that we know IREE rejects (or that
make compile time explode) are checked here, before anything is compiled,
against the target's own limits (`space.limits`).
"""

from __future__ import annotations

import random
from dataclasses import replace
from functools import lru_cache
from math import gcd, prod

from ansor_mlir.core.schedule import (
    REDUCTION,
    Candidate,
    ChoiceKnob,
    Family,
    ImplicitGemm,
    Knob,
    MicroKernel,
    Pack,
    Pad,
    Rfactor,
    Sketch,
    TileKnob,
    is_register_level,
    micro_kernel_shape,
    tile_knobs,
)
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.space import dag as dags
from ansor_mlir.space.decisions import FUSION
from ansor_mlir.space.gpu_mapping import is_gpu_sketch, is_valid_gpu
from ansor_mlir.space.implicit_gemm import sketch_dag
from ansor_mlir.space.limits import limits
from ansor_mlir.space.micro_kernel import least_cache_k, micro_kernel_fits, reduction_knob
from ansor_mlir.space.resolve import Resolved, has_interior_unit_dim, input_tiles, resolve

MAX_TRIES = 200


@lru_cache(maxsize=4096)
def divisors(n: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


def with_tile(chain: tuple[int, ...], level: int, size: int) -> tuple[int, ...]:
    """`chain` with its tile at `level` set to `size`, the tiles inside it shrunk to keep dividing."""
    out = [*chain[:level], size]
    for tile in chain[level + 1:]:
        out.append(gcd(tile, out[-1]))
    return tuple(out)


def sample_chain(knob: TileKnob, rng: random.Random, lanes: int = 1, floor: int = 1) -> tuple[int, ...]:
    """Tile sizes for one loop, outer to inner, each dividing the one above.

    With `lanes > 1` the innermost tile is drawn first among whole vectors
    (multiples of `lanes`, or the whole loop) and every outer tile is a
    multiple of it, so the loop vectors run along never needs rejecting.
    Tiles above the register levels (`vector_*`) are at least `floor` (or
    the whole bound).
    """
    inner = None
    if lanes > 1:
        inner = rng.choice([d for d in divisors(knob.extent) if d % lanes == 0 or d == knob.extent])
    sizes = []
    bound = knob.outer_bound
    for i, level in enumerate(knob.levels):
        if inner is not None and i == len(knob.levels) - 1:
            size = inner
        else:
            least = 1 if is_register_level(level) else min(floor, bound)
            size = rng.choice([d for d in divisors(bound) if (inner is None or d % inner == 0) and d >= least])
        sizes.append(size)
        bound = size
    return tuple(sizes)


# Largest non-divisor register tile of a padded knob that is not the vector loop.
MAX_PADDED_TILE = 16


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def padded_register_options(bound: int, lanes: int) -> tuple[int, ...]:
    """Register tiles of a padded loop under a tile of `bound`: its divisors and padded sizes.

    The vector loop (`lanes > 1`) takes whole vectors up to `bound` rounded up
    to a vector (a 109-wide loop gets 16, 32, ..., 112); other loops any size
    up to `MAX_PADDED_TILE` (a 109-row loop gets 2 to 16 rows).
    """
    if lanes > 1:
        padded = range(lanes, round_up(bound, lanes) + 1, lanes)
    else:
        padded = range(2, min(bound, MAX_PADDED_TILE) + 1)
    return tuple(sorted(set(divisors(bound)) | set(padded)))


def sample_padded_chain(knob: TileKnob, rng: random.Random, lanes: int = 1) -> tuple[int, ...]:
    """Outer tiles as divisor chains, the register tile among `padded_register_options`."""
    outer = sample_chain(replace(knob, levels=knob.levels[:-1], padded=False), rng) if knob.levels[1:] else ()
    bound = outer[-1] if outer else knob.extent
    options = padded_register_options(bound, lanes)
    if lanes > 1:
        options = tuple(o for o in options if o % lanes == 0 or o == bound) or options
    return (*outer, rng.choice(options))


def sample_value(knob: Knob, rng: random.Random, lanes: int = 1, floor: int = 1) -> tuple[int, ...]:
    """A random value for any knob: a tile chain (outer tiles at least `floor`) or an option index."""
    if isinstance(knob, ChoiceKnob):
        return (rng.randrange(len(knob.options)),)
    if knob.padded:
        return sample_padded_chain(knob, rng, lanes)
    return sample_chain(knob, rng, lanes, floor)


def cache_floors(sketch: Sketch, task: Task) -> dict[str, int]:
    """Knobs whose tiles above the register level have a least size (what `is_valid` checks): a micro-kernel's
    innermost reduction loop, `least_cache_k` steps per cache tile (`micro_kernel_fits`)."""
    if sketch.step(MicroKernel) is None:
        return {}
    dag = sketch_dag(sketch, task)
    if dag is None:
        return {}
    knob = reduction_knob(sketch, dag.ops[dag.root].reduction_dims[-1])
    return {knob.name: least_cache_k(knob)} if knob is not None and len(knob.levels) > 1 else {}


def register_shape(sketch: Sketch, values: dict[str, tuple[int, ...]]) -> str | None:
    """The micro-kernel shape (`MRxNR`) that `values` choose; None without a micro-kernel or its choice."""
    kernel = sketch.step(MicroKernel)
    if kernel is None or kernel.knobs[0].name not in values:
        return None
    return kernel.knobs[0].options[values[kernel.knobs[0].name][0]]


def knob_bounds(sketch: Sketch, task: Task, target: Target, shape: str | None = None
                ) -> tuple[dict[str, int], dict[str, int]]:
    """Per knob, the lanes its tiles are whole multiples of and the least tile above the register levels
    (`sample_chain`'s `lanes` and `floor`): what `is_valid` asks, drawn so rather than rejected. A micro-kernel
    of register shape `shape` (`MRxNR`) also asks column tiles of whole `nr` and row tiles of at least `mr`
    (`micro_kernel_fits`): for GRP's only AVX-512 shape, 14x32, 1 uniform draw in 80 passed."""
    lanes, floors = vector_knobs(sketch, task, target), cache_floors(sketch, task)
    kernel = sketch.step(MicroKernel)
    if kernel is None or shape is None:
        return lanes, floors
    mr, nr = micro_kernel_shape(shape)
    for knob in tile_knobs(sketch.knobs):
        if knob.of_root and knob.dim == kernel.cols and not any(is_register_level(lv) for lv in knob.levels):
            lanes = {**lanes, knob.name: max(nr, lanes.get(knob.name, 1))}
        if knob.of_root and knob.dim == kernel.rows:
            floors = {**floors, knob.name: max(mr, floors.get(knob.name, 1))}
    return lanes, floors


def vector_knobs(sketch: Sketch, task: Task, target: Target) -> dict[str, int]:
    """Knobs whose innermost tile must be whole vectors, with the lane count (what `is_valid` checks)."""
    lanes = target.vector_lanes(task.root.element_bytes)
    tiles = tile_knobs(sketch.knobs)
    if sketch.family is not Family.TRANSFORM:
        innermost = max((k for k in tiles if k.kind != REDUCTION), key=lambda k: k.dim, default=None)
        return {innermost.name: lanes} if innermost is not None else {}
    dag = sketch_dag(sketch, task)
    assert dag is not None
    root = dag.ops[dag.root]
    outputs = dags.output_dims(root)
    dims = [outputs[-1]] if outputs and outputs[-1] is not None else []
    if sketch.has(Rfactor):
        dims.append(root.reduction_dims[-1])
    return {k.name: lanes for k in tiles if k.dim in dims and k.of_root}


def vector_tiles(sketch: Sketch, values: dict[str, tuple[int, ...]]) -> dict[int, int]:
    """Innermost (register-level) tile per loop."""
    return {knob.dim: values[knob.name][-1] for knob in tile_knobs(sketch.knobs)}


def is_valid_strategy(resolved: Resolved, target: Target) -> bool:
    """The register budget, vector shapes and stack buffers of a transform strategy, over the root as
    codegen sees it."""
    sketch, task, root, reg = resolved.sketch, resolved.task, resolved.root, resolved.register
    elem = task.root.element_bytes
    limit = limits(target)
    rfactor, packed = sketch.has(Rfactor), sketch.has(Pack)
    parallel = prod(t for t, it in zip(reg, root.iterator_types, strict=True) if it == "parallel")
    # rfactor keeps a vector of partial sums per output: the split reduction tile is accumulator too.
    accumulator = parallel * (reg[root.reduction_dims[-1]] if rfactor else 1)
    if accumulator * elem > limit.accumulator_bytes or prod(reg) * elem > limit.vector_bytes:
        return False
    extra = prod(size for tiles in resolved.consumer_tiles.values() for size in tiles.values())
    if parallel * extra * elem > limit.vector_bytes:
        return False
    lanes = target.vector_lanes(elem)
    outputs = dags.output_dims(root)
    inner = outputs[-1] if outputs else None
    if inner is not None and reg[inner] % lanes and reg[inner] != root.extents[inner]:
        return False
    outer = packed or resolved.choice(FUSION) == "outer"
    # Stack buffers: the root's workgroup output when consumers run after the root or when one workgroup
    # covers the whole output (the one-iteration forall folds away and the output tile is allocated:
    # 3 MiB for ConvLayer's 112x112x64, IREE's limit is 32 KiB), packed panels, and a padded input tile.
    wg_output = resolved.workgroup_output_elements
    whole = wg_output == prod(root.extents[d] if d is not None else 1 for d in outputs)
    stack = wg_output * elem if (outer and resolved.dag.consumers) or whole else 0
    if packed:
        stack += resolved.packed_panel_bytes
    if sketch.has(ImplicitGemm):
        stack += resolved.im2col_panel_bytes * resolved.im2col_buffers
    stack += resolved.padded_input_bytes
    if stack > limit.stack_bytes:
        return False
    # A packed strategy folds no unit dims, so interior unit tiles are fine there.
    if not packed and any(has_interior_unit_dim(t) for t in resolved.output_tiles):
        return False
    if sketch.has(MicroKernel) and not micro_kernel_fits(resolved, target):
        return False
    if sketch.has(Pad) and not padded_tiles_are_sound(resolved, lanes, limit.stack_bytes):
        return False
    if rfactor:
        split = reg[root.reduction_dims[-1]]
        return split % lanes == 0 or split == root.extents[root.reduction_dims[-1]]
    return True


def padded_tiles_are_sound(resolved: Resolved, lanes: int, stack_bytes: int) -> bool:
    """Register tiles of a padded sketch: within the tile above (or that tile rounded up to whole
    vectors: 109 -> 112, never 1 -> 16), padded operand panels within IREE's stack limit `stack_bytes`
    (GMM 109^3: a 109x80 panel of B needed 34 KiB of 32), and no operand tile with an interior unit dimension.

    Padding materialises every operand tile of the root (`tensor<1x4x1xf32>`
    for a 4-row, 1-deep matmul tile), and such a tile hits the same
    `transfer_write` folding bug as an output tile (`has_interior_unit_dim`):
    wrong answers, seen on GMM 109^3 with a 4x32x1 tile. Consumers are
    computed after the root (`consumer_fusion = outer`): fused into the padded
    register tile, their input pad bufferizes to a stack buffer inside the loop,
    which IREE rejects ("all stack allocations need to be hoisted").
    """
    if resolved.choice(FUSION) == "inner":
        return False
    values = dict(resolved.candidate.values)
    for knob in tile_knobs(resolved.sketch.knobs):
        chain = values[knob.name]
        bound = chain[-2] if len(chain) > 1 else knob.extent
        rounded = bound >= lanes and chain[-1] == round_up(bound, lanes)
        if chain[-1] > bound and not rounded:
            return False
    if resolved.padded_panel_bytes > stack_bytes:
        return False
    return not any(has_interior_unit_dim(t) for t in input_tiles(resolved))


def is_valid(sketch: Sketch, values: dict[str, tuple[int, ...]], task: Task, target: Target) -> bool:
    """Reject programs IREE cannot build well, before compiling them."""
    if is_gpu_sketch(sketch):
        return is_valid_gpu(sketch, values, task, target)
    if sketch.family is Family.TRANSFORM:
        candidate = Candidate(task.key, sketch.index, tuple(sorted(values.items())))
        return is_valid_strategy(resolve(sketch, candidate, task), target)
    if sketch.has(MicroKernel):  # its register tile is the micro-kernel's, not the knobs' innermost level
        resolved = resolve(sketch, Candidate(task.key, sketch.index, tuple(sorted(values.items()))), task)
        vector = max(prod(resolved.register), pipeline_cache_level_vector_elements(sketch, values, task))
        return micro_kernel_fits(resolved, target) and vector * task.root.element_bytes <= limits(target).vector_bytes
    inner = vector_tiles(sketch, values)
    elem = task.root.element_bytes
    tiles = tile_knobs(sketch.knobs)
    parallel = [inner[k.dim] for k in tiles if k.kind != REDUCTION]
    reduction = [inner[k.dim] for k in tiles if k.kind == REDUCTION]
    limit = limits(target)
    if prod(parallel) * elem > limit.accumulator_bytes:
        return False
    if prod(parallel) * prod(reduction) * elem > limit.vector_bytes:
        return False
    lanes = target.vector_lanes(elem)
    innermost = max((k for k in tiles if k.kind != REDUCTION), key=lambda k: k.dim, default=None)
    if innermost is not None:
        tile = inner[innermost.dim]
        if tile % lanes and tile != innermost.extent:
            return False
    return pipeline_cache_level_vector_elements(sketch, values, task) * elem <= limit.vector_bytes


def _first_cache_tiles(sketch: Sketch, values: dict[str, tuple[int, ...]]) -> dict[int, int]:
    """Per loop, its tile at the first level below distribution (its extent when no such level tiles it)."""
    first: dict[int, int] = {}
    for knob in tile_knobs(sketch.knobs):
        inner = [i for i, lv in enumerate(knob.levels) if lv != "distribution"]
        first[knob.dim] = values[knob.name][inner[0]] if inner else knob.extent
    return first


def pipeline_consumer_vector_elements(sketch: Sketch, values: dict[str, tuple[int, ...]], task: Task) -> int:
    """The largest vector an IREE pipeline gives a fused consumer with loops of its own.

    IREE vectorizes such a consumer at the first tiling level below
    distribution (the cache tile when there is one), and a consumer loop the
    root does not have (softmax's normalisation over the root's reduction loop) is never
    tiled: a 256-row cache tile of a 1536x128 softmax becomes a 256x128
    vector, which IREE rejects (128 KiB, over its limit on any x86 CPU). 41 of 64 random softmax
    configurations failed this way before the check.
    """
    dag = dags.task_dag(task)
    if dag is None:
        return 0
    first_level = _first_cache_tiles(sketch, values)
    largest = 0
    for c in dag.consumers:
        mapped = dags.dim_map(dag.ops, dag.root, c)
        op = dag.ops[c]
        if all(d in mapped or extent == 1 for d, extent in enumerate(op.extents)):
            continue  # walks the root's loops only: fused at the register level (GMM's bias + relu)
        size = prod(first_level.get(mapped[d], 1) if d in mapped else extent for d, extent in enumerate(op.extents))
        largest = max(largest, size)
    return largest


def pipeline_cache_tile_vector_elements(sketch: Sketch, values: dict[str, tuple[int, ...]]) -> int:
    """The vector an IREE pipeline gives the accumulator's fill and the fused consumers when the cache level
    loops over the reduction: they run outside that loop, on the whole cache tile (0 when it does not loop).

    The README's 512^3 matmul + bias + relu with a 128x32 cache tile and K tiles of 64: a `vector<128x32xf32>`
    zero fill, bias add and relu, 16 KiB, which IREE rejects on AVX2 (its limit is 512 native vectors).
    """
    knobs = tile_knobs(sketch.knobs)
    loops = any(knob.kind == REDUCTION and "cache_reduction" in knob.levels
                and values[knob.name][knob.levels.index("cache_reduction")] < knob.extent for knob in knobs)
    if not loops:
        return 0
    first = _first_cache_tiles(sketch, values)
    return prod(first[knob.dim] for knob in knobs if knob.kind != REDUCTION)


def pipeline_cache_level_vector_elements(sketch: Sketch, values: dict[str, tuple[int, ...]], task: Task) -> int:
    """The largest vector an IREE pipeline makes above the register tile: a consumer's or the cache tile's."""
    return max(pipeline_consumer_vector_elements(sketch, values, task),
               pipeline_cache_tile_vector_elements(sketch, values))


def sample_candidate(sketch: Sketch, task: Task, target: Target, rng: random.Random) -> Candidate | None:
    """One random valid candidate of a sketch, or None if none was found."""
    if not sketch.knobs:
        return Candidate(task.key, sketch.index, ())
    kernel = sketch.step(MicroKernel)
    shape_knob = kernel.knobs[0] if kernel is not None else None
    bounds = {shape: knob_bounds(sketch, task, target, shape)
              for shape in (shape_knob.options if shape_knob is not None else (None,))}
    for _ in range(MAX_TRIES):
        # A micro-kernel's register shape first: the row and column tiles are drawn to fit it.
        values = {shape_knob.name: sample_value(shape_knob, rng)} if shape_knob is not None else {}
        lanes, floors = bounds[register_shape(sketch, values)]
        values.update({knob.name: sample_value(knob, rng, lanes.get(knob.name, 1), floors.get(knob.name, 1))
                       for knob in sketch.knobs if knob.name not in values})
        if is_valid(sketch, values, task, target):
            return Candidate(task.key, sketch.index, tuple(sorted(values.items())))
    return None



def sample_fresh(
    sketches: list[Sketch], task: Task, target: Target, rng: random.Random, count: int, seen: set[str]
) -> list[Candidate]:
    """Up to `count` random candidates of the open sketches not in `seen` (which is updated)."""
    open_sketches = [s for s in sketches if s.knobs]
    out: list[Candidate] = []
    for _ in range(count * 10 + 20):
        if len(out) >= count or not open_sketches:
            break
        candidate = sample_candidate(rng.choice(open_sketches), task, target, rng)
        if candidate is not None and candidate.identity not in seen:
            seen.add(candidate.identity)
            out.append(candidate)
    return out

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

from ansor_mlir.core.schedule import MicroKernel, micro_kernel_shape
from ansor_mlir.core.target import Target
from ansor_mlir.space.dag import Dag, operands_along, output_dims, unit_register_dims, vector_loop
from ansor_mlir.space.resolve import Resolved

# The register tile's vectors of B in one row (nr / lanes): wider rows leave too few rows for reuse of B.
MAX_ROW_VECTORS = 4
# Vector registers a micro-kernel needs besides its accumulators and B vectors: one broadcast of A.
BROADCAST_REGISTERS = 1
# Register tile along the reduction loop (`k` unroll): enough to schedule loads ahead, no more (code size).
MAX_K_UNROLL = 8


@dataclass(frozen=True)
class MicroKernelLoops:
    """The root's loops a micro-kernel tiles: `rows` (reuse of the B vectors), `cols` (the vector loop) and the
    innermost reduction loop `k`."""

    rows: int
    cols: int
    k: int


def micro_kernel_loops(dag: Dag) -> MicroKernelLoops | None:
    """The outer-product loops of a contraction root, None when it has none.

    `cols` is the output's vector loop, which every input it indexes must read
    contiguously (a transposed `B` is the packing rule's); `rows` is the
    innermost other parallel loop of the output that some input does not read
    (the broadcast side: `B` is reused across it) and some input does; `k` the
    innermost reduction loop. None of them may be a loop the register tile
    keeps unit (`unit_register_dims`: strided or dilated windows), so a
    stride-1 convolution is an implicit GEMM (output pixels of a row x output
    channels, over input channels; its window loops unit and folded).
    """
    if not dag.is_contraction():
        return None
    root = dag.ops[dag.root]
    outputs = output_dims(root)
    if not root.reduction_dims or not outputs or outputs[-1] is None:
        return None
    forced = unit_register_dims(root)
    cols, k = vector_loop(root), root.reduction_dims[-1]
    if {cols, k} & forced or any(dims[-1] != [cols] for i, dims in operands_along(root, cols) if i < root.num_inputs):
        return None
    inputs = root.indexing_maps[: root.num_inputs]
    for d in reversed([d for d in outputs if d is not None and d != cols and d not in forced]):
        if root.extents[d] > 1 and any(d not in m.dims() for m in inputs) and any(d in m.dims() for m in inputs):
            return MicroKernelLoops(d, cols, k)
    return None


def register_shapes(rows_extent: int, cols_extent: int, target: Target, element_bytes: int) -> tuple[str, ...]:
    """`MRxNR` register tiles of the target: accumulators plus one row of B vectors and a broadcast fit the vector
    register file, at least half of it is accumulators, and both sizes divide their loops (smallest `nr` first)."""
    lanes = target.vector_lanes(element_bytes)
    registers = target.vector_registers
    shapes = []
    for vectors in range(1, MAX_ROW_VECTORS + 1):
        nr = vectors * lanes
        if cols_extent % nr:
            continue
        for mr in range(1, rows_extent + 1):
            accumulators = mr * vectors
            if rows_extent % mr or 2 * accumulators < registers:
                continue
            if accumulators + vectors + BROADCAST_REGISTERS <= registers:
                shapes.append(f"{mr}x{nr}")
    return tuple(shapes)


def micro_kernel_fits(resolved: Resolved) -> bool:
    """The micro-kernel tiles the tile above it exactly (whole `mr x nr` blocks in every cache and workgroup
    tile), and its reduction unroll is modest."""
    step = resolved.sketch.step(MicroKernel)
    assert isinstance(step, MicroKernel)
    (knob,) = step.knobs
    mr, nr = micro_kernel_shape(resolved.candidate.choice(knob) or knob.options[0])
    above = resolved.above_register
    workgroup = [size or extent for size, extent in zip(
        resolved.per_level.get("distribution", [0] * len(above)), resolved.extents, strict=True)]
    for tiles in (above, workgroup):
        if tiles[step.rows] % mr or tiles[step.cols] % nr:
            return False
    reduction = [d for d, it in enumerate(resolved.iterator_types) if it == "reduction"]
    return prod(resolved.register[d] for d in reduction) <= MAX_K_UNROLL

"""`MicroKernel`: the root's register tile as an `mr x nr` outer-product micro-kernel (`space.micro_kernel` holds
the loop structure and the shapes that fit the target).

Its register shape is drawn first and bounds the row and column tiles; the
strategy peels a partial last row tile (`transform.loop.peel`) so both loops
have static tiles, unrolls the reduction steps inside the register tile, and
unrolls a direct convolution's rows (window loops no vector spans).
"""

from __future__ import annotations

from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects.transform import loop, vector

from ansor_mlir.core.schedule import (
    Candidate,
    ChoiceKnob,
    MicroKernel,
    Sketch,
    is_register_level,
    micro_kernel_shape,
    tile_knobs,
)
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import LinalgOpInfo
from ansor_mlir.space.dag import Dag, dim_map, output_dims, read_through_window
from ansor_mlir.space.micro_kernel import least_cache_k, micro_kernel_fits, peeled_rows, reduction_knob
from ansor_mlir.space.resolved import Resolved
from ansor_mlir.steps.checks import CheckContext, VectorSizeLimit
from ansor_mlir.steps.configure_pipeline import PipelineKnobTiles
from ansor_mlir.steps.script import loop_position
from ansor_mlir.steps.step_kind import Bounds, Emission, StepKind


def micro_kernel_tiles(step: MicroKernel, candidate: Candidate, extents: tuple[int, ...],
                       iterator_types: tuple[str, ...]) -> dict[str, dict[int, int]]:
    """Register tiles the micro-kernel sets on the root's loops, per level: `mr` and `nr` on its loops and every
    other parallel loop unit (`vector_common_parallel`), every reduction loop but the innermost unit
    (`vector_reduction`)."""
    (knob,) = step.knobs
    mr, nr = micro_kernel_shape(candidate.choice(knob) or knob.options[0])
    parallel = {d: 1 for d, it in enumerate(iterator_types) if it == "parallel" and extents[d] > 1}
    reductions = [d for d, it in enumerate(iterator_types) if it == "reduction"]
    reduction = {d: 1 for d in reductions[:-1] if extents[d] > 1}
    return {"vector_common_parallel": {**parallel, step.rows: mr, step.cols: nr}, "vector_reduction": reduction}


def window_rows(step: MicroKernel, resolved: Resolved) -> bool:
    """The kernel's rows are split into single rows and unrolled: a window loop (no vector spans it), or rows
    read through a stride-1 window.

    Cut outside the reduction steps: inside them, each step read, updated and wrote back every row's
    accumulator in turn and the writes stayed in the hot loop as stores to the output (C2D's 4x16 tile: 24
    stores per 24 FMAs, 0.45x IREE's default; with the rows outside, 1.1x). The implicit GEMM's rows (`ow` of a
    stride-1 convolution, read through `ow + kw`) are split too: once the unit window and channel loops fold
    away, their input is one strided `vector<4xf32>` read, which IREE lowers on AVX2 to a loop inserting one
    element per iteration (C2D 20x20x160->192 3x3 on Zen 3: 20 GFLOP/s, IREE's default; split, 55-58,
    2.6-2.8x). A contraction's rows (`A[i, k]`, read as `vector<4x1xf32>`, one broadcast per row) are not:
    split, the 512^3 example's 6x16 kernel ran 0.8x.
    """
    return resolved.register[step.rows] > 1 and (step.unrolled or read_through_window(resolved.root, step.rows))


@dataclass(frozen=True)
class MicroKernelFits:
    """`space.micro_kernel.micro_kernel_fits`: whole `nr` columns and `mr` rows per tile, enough reduction steps
    per cache tile, an unroll that does not spill."""

    def __call__(self, ctx: CheckContext) -> bool:
        return micro_kernel_fits(ctx.resolved, ctx.target)


class MicroKernelKind(StepKind[MicroKernel]):
    step = MicroKernel
    # Its register tile is the micro-kernel's, not the knobs' innermost level (a pipeline's knob checks).
    checks = (MicroKernelFits(), VectorSizeLimit())
    waives = (PipelineKnobTiles,)

    def forced_units(self, step: MicroKernel, root: LinalgOpInfo, forced: set[int]) -> set[int]:
        # A window loop whose register rows the strategy unrolls.
        return forced - {step.rows} if step.unrolled else forced

    def fixed_tiles(self, step: MicroKernel, candidate: Candidate, extents: tuple[int, ...],
                    iterator_types: tuple[str, ...]) -> dict[str, dict[int, int]]:
        return micro_kernel_tiles(step, candidate, extents, iterator_types)

    def leading_knob(self, step: MicroKernel) -> ChoiceKnob | None:
        (knob,) = step.knobs
        assert isinstance(knob, ChoiceKnob)
        return knob

    def bounds(self, step: MicroKernel, sketch: Sketch, dag: Dag | None, target: Target, element_bytes: int,
               bounds: Bounds, leading: str | None) -> Bounds:
        """A micro-kernel's innermost reduction loop gets `least_cache_k` steps per cache tile; with its shape
        `MRxNR` drawn, column tiles of whole `nr` and row tiles of at least `mr` (`micro_kernel_fits`): for
        GRP's only AVX-512 shape, 14x32, 1 uniform draw in 80 passed."""
        lanes, floors = bounds
        if dag is not None:
            knob = reduction_knob(sketch, dag.ops[dag.root].reduction_dims[-1])
            if knob is not None and len(knob.levels) > 1:
                floors = {**floors, knob.name: least_cache_k(knob)}
        if leading is None:
            return lanes, floors
        mr, nr = micro_kernel_shape(leading)
        for knob in tile_knobs(sketch.knobs):
            if knob.of_root and knob.dim == step.cols and not any(is_register_level(lv) for lv in knob.levels):
                lanes = {**lanes, knob.name: max(nr, lanes.get(knob.name, 1))}
            if knob.of_root and knob.dim == step.rows:
                floors = {**floors, knob.name: max(mr, floors.get(knob.name, 1))}
        return lanes, floors

    def after_root_tile(self, step: MicroKernel, e: Emission, level: str, sizes: tuple[int, ...],
                        loops: list[ir.Value]) -> None:
        """A row tile that does not divide the tile above: the partial last row tile is peeled; each part holds
        the root, after its fused fill."""
        peel = peeled_rows(e.resolved)
        if peel is None or level != "vector_common_parallel":
            return
        parts = e.script.peel(loops[loop_position(sizes, peel)])
        count = 1 if e.fill is None else 2
        e.handles[e.dag.root] = e.script.merge([e.script.ops_in(part, count)[-1] for part in parts])

    def after_chain_tile(self, step: MicroKernel, e: Emission, level: str, sizes: list[int],
                         loops: list[ir.Value]) -> None:
        """Peeled with the consumer chain: fusion placed the ops in dispatch order (fills, root, the consumer
        chain; `peelable`), so each part's ops are read back in that order."""
        peel = peeled_rows(e.resolved)
        if peel is None or level != "vector_common_parallel":
            return
        dag, s = e.dag, e.script
        rows = next(mine for mine, theirs in dim_map(dag.ops, dag.root, dag.last).items() if theirs == peel)
        found = [s.ops_in(part, len(dag.ops)) for part in s.peel(loops[loop_position(sizes, rows)])]
        e.handles = [s.merge([part[i] for part in found]) for i in range(len(dag.ops))]

    def after_fill_tile(self, step: MicroKernel, e: Emission, fill: int, sizes: list[int],
                        loops: list[ir.Value]) -> None:
        """A fill tiled on its own is peeled where the workgroup's tile (the root's may be a cache tile) leaves a
        partial row tile."""
        peel = peeled_rows(e.resolved)
        if peel is None:
            return
        dist = e.resolved.per_level.get("distribution", [0] * len(e.root.extents))
        if (dist[peel] or e.root.extents[peel]) % e.resolved.register[peel]:
            e.script.peel(loops[loop_position(sizes, output_dims(e.root).index(peel))])

    def unroll(self, step: MicroKernel, e: Emission) -> None:
        """Window rows split into single rows and unrolled (`window_rows`), each reusing the filter vectors
        (loaded once per reduction step, shared by CSE); the reduction unroll as single steps, unrolled, not one
        contraction over a vector of `u` steps, which reads each row of `A` as a `u`-vector and broadcasts its
        elements with shuffles; a single step's elements are scalar loads that broadcast from memory
        (`vbroadcastss`). On Zen 3 the 512^3 example's 4x16 kernel with `u = 2` ran 0.62x the same kernel with
        `u = 1` (packed) and 0.80x unpacked."""
        root, reg, s = e.root, e.resolved.register, e.script
        row_loop = step_loop = None
        if window_rows(step, e.resolved):
            rows = [1 if d == step.rows else 0 for d in range(len(root.extents))]
            e.handles[e.dag.root], (row_loop,) = s.tile_for(e.handles[e.dag.root], rows)
        unroll = reg[root.reduction_dims[-1]]
        if unroll > 1:
            steps = [1 if d == root.reduction_dims[-1] else 0 for d in range(len(root.extents))]
            e.handles[e.dag.root], (step_loop,) = s.tile_for(e.handles[e.dag.root], steps)
        if step_loop is not None:
            loop.LoopUnrollOp(step_loop, factor=unroll)
        if row_loop is not None:
            loop.LoopUnrollOp(row_loop, factor=reg[step.rows])

    def after_vectorize(self, step: MicroKernel, e: Emission) -> None:
        """Each window row's accumulator is read as `vector<16xf32>` and written as `vector<1x1x1x16xf32>`:
        unmatched, the pair is not hoisted out of the window loops (8 stores per 24 FMAs in C2D's hot loop).
        Dropping the leading unit dims makes the pairs match."""
        if window_rows(step, e.resolved):
            assert e.func is not None
            e.script.patterns(e.func, [vector.ApplyCastAwayVectorLeadingOneDimPatternsOp])

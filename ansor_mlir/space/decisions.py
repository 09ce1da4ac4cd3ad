"""The decisions a transform sketch leaves open: tile-size chains and categorical choices.

Knob names are labels for records and people; the structure a knob stands
for (which loop, of which op, at which levels) is in its fields.
"""

from __future__ import annotations

from ansor_mlir.core.schedule import (
    LEVEL_KIND,
    REDUCTION,
    SPATIAL,
    CacheWrite,
    ChoiceKnob,
    Decompose,
    FuseConsumers,
    LowerContraction,
    LowerReduction,
    MicroKernel,
    Pack,
    Pad,
    Rfactor,
    Step,
    TileAndFuse,
    TileKnob,
    is_register_level,
)
from ansor_mlir.space.dag import Dag, dim_map, forced_unit_dims

FUSION = ChoiceKnob("consumer_fusion", ("inner", "outer"))
CACHE_WRITE = ChoiceKnob("cache_write", ("hoist", "none"))
LOWERING = ChoiceKnob("lowering", ("outerproduct", "dot", "parallelarith"))
REDUCTION_LOWERING = ChoiceKnob("reduction_lowering", ("innerparallel", "innerreduction"))
# A micro-kernel's register tile along the reduction loop (`k` unroll): enough to schedule loads ahead, no more
# (code size). A shorter innermost reduction loop is unrolled whole.
MAX_K_UNROLL = 8


def tiling_knobs(dag: Dag, levels: tuple[str, ...], padded: bool = False, decomposed: bool = False) -> list[TileKnob]:
    """One tile knob per non-unit loop of the root, over the levels of its kind.

    With `padded`, register tiles of parallel loops (and of reduction loops of
    contractions, where a zero operand adds nothing) may be non-divisors.
    Loops `forced_unit_dims(root, decomposed)` have no register level.
    """
    root = dag.ops[dag.root]
    distributed = dag.distributed_dims()
    forced = forced_unit_dims(root, decomposed)
    knobs = []
    for d, (extent, iterator) in enumerate(zip(root.extents, root.iterator_types, strict=True)):
        if extent <= 1:
            continue
        kind = REDUCTION if iterator == "reduction" else SPATIAL
        dim_levels = tuple(
            lv for lv in levels
            if LEVEL_KIND[lv] == kind
            and lv != "vector_inner_parallel"
            and not (lv == "distribution" and d not in distributed)
            and not (is_register_level(lv) and d in forced)
        )
        pads = padded and dim_levels[-1:] != () and is_register_level(dim_levels[-1]) and (
            kind == SPATIAL or dag.is_contraction())
        if dim_levels:
            knobs.append(TileKnob(name=f"d{d}", dim=d, extent=extent, levels=dim_levels, padded=pads))
    return knobs


def consumer_knobs(dag: Dag) -> list[TileKnob]:
    """Register tiles of consumer loops that have no counterpart in the root."""
    knobs = []
    for c in dag.consumers:
        mapped = dim_map(dag.ops, dag.root, c)
        for d, extent in enumerate(dag.ops[c].extents):
            if d not in mapped and extent > 1 and dag.ops[c].iterator_types[d] == "parallel":
                knobs.append(TileKnob(f"c{c}d{d}", d, extent, ("vector_inner_parallel",), op=c))
    return knobs


def transform_steps(
    dag: Dag, levels: tuple[str, ...], *, rfactor: bool = False, padded: bool = False, packed: bool = False,
    decomposed: bool = False, pack_block: int = 0,
) -> tuple[Step, ...]:
    """The trace of a transform sketch: multi-level tiling and fusion, the structural primitives asked for,
    then the consumer placement, cache write and vector lowering decisions the DAG calls for.

    A packed root has no register tile to fuse consumers into: they run after it (no fusion knob). rfactor
    keeps its own vector of partial sums (no cache-write knob).
    """
    root = dag.ops[dag.root]
    steps: list[Step] = [TileAndFuse((*tiling_knobs(dag, levels, padded, decomposed), *consumer_knobs(dag)))]
    steps += [step for wanted, step in ((packed, Pack(block=pack_block)), (padded, Pad()), (decomposed, Decompose()),
                                        (rfactor, Rfactor())) if wanted]
    if dag.consumers:
        steps.append(FuseConsumers(() if packed else (FUSION,)))
    if root.reduction_dims and not rfactor:
        steps.append(CacheWrite((CACHE_WRITE,)))
    if dag.is_contraction():
        steps.append(LowerContraction((LOWERING,)))
    elif root.reduction_dims:
        steps.append(LowerReduction((REDUCTION_LOWERING,)))
    return tuple(steps)


def micro_kernel_steps(
    dag: Dag, levels: tuple[str, ...], rows: int, cols: int, shapes: tuple[str, ...], packed: bool = False,
    unrolled: bool = False, pack_block: int = 0,
) -> tuple[Step, ...]:
    """The trace of a micro-kernel sketch: workgroup and cache tiles of every loop (the cache blocking `mc`,
    `nc`, `kc`), the register tile one of `shapes` (`MRxNR` over loops `rows` and `cols`), the innermost
    reduction loop's register tile its unroll (a loop of at most `MAX_K_UNROLL` unrolled whole); accumulators
    always hoisted across the reduction loop and contractions lowered to outer products (FMAs with a broadcast
    operand), so neither is a knob. With `packed` the inputs read across `cols` are packed into `[k, nr]` panels
    above the register levels (`Pack`); with `unrolled` the rows are a window loop, unrolled
    (`MicroKernel.unrolled`)."""
    cache = tuple(lv for lv in levels if not is_register_level(lv))
    knobs = []
    for knob in tiling_knobs(dag, levels):
        innermost_reduction = knob.kind == REDUCTION and knob.dim == dag.ops[dag.root].reduction_dims[-1]
        if innermost_reduction and knob.extent <= MAX_K_UNROLL:
            # Never tiled: a short reduction loop around the register tile runs far slower than the same tile
            # with it unrolled (CHANGELOG.md, limits).
            continue
        kept = tuple(lv for lv in knob.levels if lv in cache or innermost_reduction)
        if kept:
            knobs.append(TileKnob(knob.name, knob.dim, knob.extent, kept))
    steps: list[Step] = [TileAndFuse((*knobs, *consumer_knobs(dag))), *([Pack(block=pack_block)] if packed else []),
                         MicroKernel((ChoiceKnob("micro_kernel", shapes),), rows, cols, unrolled)]
    if dag.consumers:
        # A packed root runs its consumers after it, as in `transform_steps`.
        steps.append(FuseConsumers(() if packed else (FUSION,)))
    return (*steps, CacheWrite(), LowerContraction())

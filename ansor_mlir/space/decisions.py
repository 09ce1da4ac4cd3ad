"""The decisions a transform sketch leaves open: tile-size chains and categorical choices."""

from __future__ import annotations

import re

from ansor_mlir.core.schedule import LEVEL_KIND, REDUCTION, SPATIAL, ChoiceKnob, TileKnob
from ansor_mlir.space.dag import Dag, dim_map, forced_unit_dims

TRANSFORM = "transform"
PADDING = "padding"
PACKING = "packing"

FUSION = ChoiceKnob("consumer_fusion", ("inner", "outer"))
CACHE_WRITE = ChoiceKnob("cache_write", ("hoist", "none"))
LOWERING = ChoiceKnob("lowering", ("outerproduct", "dot", "parallelarith"))
REDUCTION_LOWERING = ChoiceKnob("reduction_lowering", ("innerparallel", "innerreduction"))


def tiling_knobs(
    dag: Dag, levels: tuple[str, ...], padded: bool = False, rules: tuple[str, ...] = ()
) -> list[TileKnob]:
    """One tile knob per non-unit loop of the root, over the levels of its kind.

    With `padded`, register tiles of parallel loops (and of reduction loops of
    contractions, where a zero operand adds nothing) may be non-divisors.
    Loops `forced_unit_dims(rules, root)` have no register level.
    """
    root = dag.ops[dag.root]
    distributed = dag.distributed_dims()
    forced = forced_unit_dims(rules, root)
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
            and not (lv.startswith("vector_") and d in forced)
        )
        pads = padded and dim_levels[-1:] != () and dim_levels[-1].startswith("vector_") and (
            kind == SPATIAL or dag.is_contraction())
        if dim_levels:
            knobs.append(TileKnob(name=f"d{d}", dim=d, extent=extent, levels=dim_levels, padded=pads))
    return knobs


def is_consumer_knob(name: str) -> bool:
    """`c{op}d{loop}`: a consumer's own register tile, not a loop of the root."""
    return re.fullmatch(r"c\d+d\d+", name) is not None


def consumer_knobs(dag: Dag) -> list[TileKnob]:
    """Register tiles of consumer loops that have no counterpart in the root."""
    knobs = []
    for c in dag.consumers:
        mapped = dim_map(dag.ops, dag.root, c)
        for d, extent in enumerate(dag.ops[c].extents):
            if d not in mapped and extent > 1 and dag.ops[c].iterator_types[d] == "parallel":
                knobs.append(TileKnob(f"c{c}d{d}", d, extent, ("vector_inner_parallel",)))
    return knobs


def choice_knobs(dag: Dag, rfactor: bool, fusion: bool = True) -> list[ChoiceKnob]:
    """`fusion=False`: consumers always run after the root (a packed root has no register tile to fuse into)."""
    knobs = []
    if dag.consumers and fusion:
        knobs.append(FUSION)
    if dag.ops[dag.root].reduction_dims and not rfactor:
        knobs.append(CACHE_WRITE)
    if dag.is_contraction():
        knobs.append(LOWERING)
    elif dag.ops[dag.root].reduction_dims:
        knobs.append(REDUCTION_LOWERING)
    return knobs


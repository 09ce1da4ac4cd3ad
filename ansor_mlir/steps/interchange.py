"""`Interchange`: the root's loops at one tiling level run in another order (Ansor's and TVM's `reorder`).

The tiled loops of a level nest in the root's loop order unless a step says
otherwise: this one names the order of its loops `dims` at `level` (the
knob's option, outermost first), emitted as the `interchange` of that level's
`tile_using_for` (or `fuse`). Over a contraction's cache tiles the order
decides which operand's panel stays in cache across the inner loop: rows
outer, a row panel of `A` is reused across the column tiles of `B`; columns
outer, a column panel of `B` across the row tiles of `A`.

`InterchangeRule` offers it on the plain cached multi-level tiling sketch of
a contraction: a copy of that sketch with the step after its tiling, one
option per order of its cache-tiled parallel loops other than their own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import permutations
from typing import ClassVar

from ansor_mlir.core.schedule import (
    SPATIAL,
    CacheWrite,
    ChoiceKnob,
    Family,
    FuseConsumers,
    LowerContraction,
    Sketch,
    Step,
    TileAndFuse,
    tile_knobs,
)
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.space.dag import task_dag, unit_register_dims
from ansor_mlir.space.resolved import Resolved
from ansor_mlir.steps.checks import CheckContext
from ansor_mlir.steps.step_kind import Emission, LevelTiling, StepKind

LEVEL = "cache_parallel"
# Loops reordered at most (the innermost ones): 3! - 1 orders.
MAX_LOOPS = 3
# The steps of the sketch the rule derives from: multi-level tiling and nothing that reorders or re-tiles it.
PLAIN_STEPS = (TileAndFuse, FuseConsumers, CacheWrite, LowerContraction)


@dataclass(frozen=True)
class Interchange(Step):
    """The root's loops `dims` at tiling level `level` nest in the order the knob's option names (`"1,0"`:
    loop 1 outermost), the root's other loops where they were."""

    kind: ClassVar[str] = "interchange"
    level: str = LEVEL
    dims: tuple[int, ...] = ()


def order_of(step: Interchange, option: str, rank: int) -> tuple[int, ...]:
    """The root's `rank` loops in the option's order: the step's loops permuted in place, the others kept."""
    chosen = iter(int(d) for d in option.split(","))
    return tuple(next(chosen) if d in step.dims else d for d in range(rank))


@dataclass(frozen=True)
class InterchangeMovesLoops:
    """The order changes the program: the loops tiled at the level nest in another order than the root's, and
    it is the root that is tiled there (not the consumer chain with the root fused in, whose loops keep their
    order). Otherwise the candidate is one of the sketch it was derived from."""

    def __call__(self, ctx: CheckContext) -> bool:
        resolved = ctx.resolved
        if resolved.consumers_inner:
            return False
        for level, order in resolved.loop_order.items():
            tiled = [d for d, size in enumerate(resolved.per_level.get(level, ())) if size]
            if [d for d in order if d in tiled] == tiled:
                return False
        return True


class InterchangeKind(StepKind[Interchange]):
    step = Interchange
    checks = (InterchangeMovesLoops(),)

    def refine(self, step: Interchange, resolved: Resolved) -> Resolved:
        (knob,) = step.knobs
        assert isinstance(knob, ChoiceKnob)
        option = resolved.candidate.choice(knob) or knob.options[0]
        order = order_of(step, option, len(resolved.extents))
        return replace(resolved, loop_order={**resolved.loop_order, step.level: order})

    def level_tiling(self, step: Interchange, e: Emission, level: str, tiling: LevelTiling) -> LevelTiling | None:
        if level != step.level:
            return tiling
        return replace(tiling, interchange=e.resolved.loop_order[level])


def interchange_step(sketch: Sketch, task: Task) -> Interchange | None:
    """The step over the cache-tiled parallel loops of a plain cached tiling sketch of a contraction, None where
    fewer than two such loops exist."""
    dag = task_dag(task)
    if dag is None or not dag.is_contraction() or unit_register_dims(dag.ops[dag.root]):
        return None
    dims = tuple(sorted(k.dim for k in tile_knobs(sketch.knobs) if k.of_root and k.kind == SPATIAL
                        and LEVEL in k.levels))[-MAX_LOOPS:]
    if len(dims) < 2:
        return None
    options = tuple(",".join(str(d) for d in order) for order in permutations(dims) if order != dims)
    return Interchange((ChoiceKnob("loop_order", options),), LEVEL, dims)


@dataclass(frozen=True)
class InterchangeRule:
    """Appends, for the plain cached multi-level tiling sketch of a contraction, a copy whose cache-level loops run
    in another order (a refining rule: it reads the sketches the rules before it made)."""

    name: str = "interchange"

    def applies(self, task: Task, target: Target) -> bool:
        return target.gpu is None

    def refine(self, task: Task, target: Target, sketches: list[Sketch]) -> list[Sketch]:
        derived = []
        for sketch in sketches:
            plain = all(isinstance(s, PLAIN_STEPS) for s in sketch.steps)
            if sketch.family is not Family.TRANSFORM or LEVEL not in sketch.levels or not plain:
                continue
            step = interchange_step(sketch, task)
            if step is not None:
                tiling, *rest = sketch.steps
                derived.append(replace(sketch, index=len(sketches) + len(derived), steps=(tiling, step, *rest),
                                       rules=(*sketch.rules, self.name)))
        return [*sketches, *derived]

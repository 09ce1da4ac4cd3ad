"""Validity checks: small named units, each testable alone, that a step kind lists (MetaSchedule's postprocessors).

A check judges one candidate before anything is compiled: `True` when the program it stands for is one IREE can
build well on the target. The checks here guard the register tiles any multi-level tiling makes (the
`TileAndFuse` kind lists them); a step kind with constraints of its own defines them in its module. Checks read
the resolved loop structure (`CheckContext.resolved`) and the target's limits (`space.limits`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from math import prod
from typing import Protocol

from ansor_mlir.core.schedule import Candidate, Sketch
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.space.dag import output_dims, read_through_window
from ansor_mlir.space.limits import Limits, limits
from ansor_mlir.space.resolved import Resolved, has_interior_unit_dim, workgroup_stack_bytes

Resolver = Callable[[Sketch, Candidate, Task], Resolved]


@dataclass(frozen=True)
class CheckContext:
    """One candidate as the checks see it: its decisions, and the loop structure they resolve to (built on
    first use, by the `resolve` the caller passes)."""

    sketch: Sketch
    values: dict[str, tuple[int, ...]]
    task: Task
    target: Target
    resolver: Resolver

    @cached_property
    def candidate(self) -> Candidate:
        return Candidate(self.task.key, self.sketch.index, tuple(sorted(self.values.items())))

    @cached_property
    def resolved(self) -> Resolved:
        return self.resolver(self.sketch, self.candidate, self.task)

    @cached_property
    def limits(self) -> Limits:
        return limits(self.target)

    @property
    def element_bytes(self) -> int:
        return self.task.root.element_bytes

    @property
    def lanes(self) -> int:
        return self.target.vector_lanes(self.element_bytes)


class Check(Protocol):
    """A named validity check: `True` when the candidate passes."""

    def __call__(self, ctx: CheckContext) -> bool: ...


def check_name(check: Check) -> str:
    return type(check).__name__


def parallel_register_elements(resolved: Resolved) -> int:
    """Elements of the root's register tile over its parallel loops."""
    return prod(t for t, it in zip(resolved.register, resolved.root.iterator_types, strict=True) if it == "parallel")


@dataclass(frozen=True)
class AccumulatorLimit:
    """The root's accumulators (its parallel register tile, and any partial sums it keeps) fit the vector
    registers the target leaves for them: they live across the reduction loop."""

    def __call__(self, ctx: CheckContext) -> bool:
        return ctx.resolved.accumulator_elements * ctx.element_bytes <= ctx.limits.accumulator_bytes


@dataclass(frozen=True)
class VectorSizeLimit:
    """The root's register tile, as one flat vector, stays within the largest vector the target allows."""

    def __call__(self, ctx: CheckContext) -> bool:
        return prod(ctx.resolved.register) * ctx.element_bytes <= ctx.limits.vector_bytes


@dataclass(frozen=True)
class ConsumerVectorLimit:
    """A consumer's register tile over loops of its own (the root's parallel tile times their tiles) stays within
    the largest vector too."""

    def __call__(self, ctx: CheckContext) -> bool:
        resolved = ctx.resolved
        extra = prod(size for tiles in resolved.consumer_tiles.values() for size in tiles.values())
        return parallel_register_elements(resolved) * extra * ctx.element_bytes <= ctx.limits.vector_bytes


@dataclass(frozen=True)
class WholeVectors:
    """The output's innermost loop is tiled in whole vectors (or whole)."""

    def __call__(self, ctx: CheckContext) -> bool:
        resolved = ctx.resolved
        outputs = output_dims(resolved.root)
        inner = outputs[-1] if outputs else None
        if inner is None:
            return True
        return resolved.register[inner] % ctx.lanes == 0 or resolved.register[inner] == resolved.root.extents[inner]


@dataclass(frozen=True)
class StackLimit:
    """A workgroup's stack buffers fit IREE's stack limit (`workgroup_stack_bytes`: 3 MiB for ConvLayer's
    112x112x64 output tile where one workgroup covers it; IREE's limit is 32 KiB)."""

    def __call__(self, ctx: CheckContext) -> bool:
        stack = workgroup_stack_bytes(ctx.resolved, ctx.element_bytes, ctx.task.stores_into_slice)
        return stack <= ctx.limits.stack_bytes


@dataclass(frozen=True)
class PaddedWindowsSplit:
    """A dispatch that pads its own input splits a window dimension across workgroups: a workgroup tile spanning
    every padded window dimension whole failed to bufferize ("incompatible buffer types on then/else branches",
    IREE 3.13: a 14x14 depthwise convolution's 14x14x16 workgroup tile on znver3)."""

    def __call__(self, ctx: CheckContext) -> bool:
        if not ctx.task.pads_input:
            return True
        resolved = ctx.resolved
        root, wg = resolved.root, resolved.level_tiles()["wg"]
        windows = [d for d, kind in enumerate(root.iterator_types)
                   if kind == "parallel" and read_through_window(root, d)]
        return not windows or any(wg[d] < resolved.extents[d] for d in windows)


@dataclass(frozen=True)
class InteriorUnitDims:
    """No vectorized op's output tile has an interior unit dimension (`has_interior_unit_dim`): folding unit
    dims turns such a tile's write into wrong answers (IREE 3.13)."""

    def __call__(self, ctx: CheckContext) -> bool:
        return not any(has_interior_unit_dim(t) for t in ctx.resolved.output_tiles)


# The register-tile checks of every CPU multi-level tiling, in the order they are cheapest to fail.
REGISTER_TILE_CHECKS: tuple[Check, ...] = (AccumulatorLimit(), VectorSizeLimit(), ConsumerVectorLimit(),
                                           WholeVectors(), StackLimit(), PaddedWindowsSplit(), InteriorUnitDims())

"""`CacheWrite`: accumulators hoisted out of the reduction loops (`transform.loop.hoist_loop_invariant_subsets`),
or, where the knob says `none`, left to be read and written on every reduction step. Strategies hoist without
the step too; the step makes it a decision."""

from __future__ import annotations

from dataclasses import replace

from ansor_mlir.core.schedule import CacheWrite
from ansor_mlir.space.decisions import CACHE_WRITE
from ansor_mlir.space.resolved import Resolved
from ansor_mlir.steps.step_kind import Settings, StepKind


class CacheWriteKind(StepKind[CacheWrite]):
    step = CacheWrite

    def configure(self, step: CacheWrite, resolved: Resolved, settings: Settings) -> Settings:
        return replace(settings, hoist_accumulators=resolved.choice(CACHE_WRITE) in (None, "hoist"))

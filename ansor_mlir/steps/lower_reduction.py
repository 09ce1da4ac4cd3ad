"""`LowerReduction`: how vector multi-reductions are lowered (`innerparallel` or `innerreduction`)."""

from __future__ import annotations

from dataclasses import replace

from ansor_mlir.core.schedule import LowerReduction
from ansor_mlir.space.decisions import REDUCTION_LOWERING
from ansor_mlir.space.resolved import Resolved
from ansor_mlir.steps.step_kind import Settings, StepKind


class LowerReductionKind(StepKind[LowerReduction]):
    step = LowerReduction

    def configure(self, step: LowerReduction, resolved: Resolved, settings: Settings) -> Settings:
        return replace(settings, reduction_lowering=resolved.choice(REDUCTION_LOWERING) or settings.reduction_lowering)

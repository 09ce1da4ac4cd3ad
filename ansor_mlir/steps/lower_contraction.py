"""`LowerContraction`: how vector contractions are lowered (`outerproduct`, `dot`, `parallelarith`); without the
knob, to outer products (FMAs with a broadcast operand)."""

from __future__ import annotations

from dataclasses import replace

from ansor_mlir.core.schedule import LowerContraction
from ansor_mlir.space.decisions import LOWERING
from ansor_mlir.space.resolved import Resolved
from ansor_mlir.steps.step_kind import Settings, StepKind


class LowerContractionKind(StepKind[LowerContraction]):
    step = LowerContraction

    def configure(self, step: LowerContraction, resolved: Resolved, settings: Settings) -> Settings:
        return replace(settings, contraction_lowering=resolved.choice(LOWERING) or settings.contraction_lowering)

"""`UseIreeDefault`: sketch zero, IREE's own configuration, so tuning never loses to it."""

from __future__ import annotations

from ansor_mlir.core.schedule import Candidate, Sketch, UseIreeDefault
from ansor_mlir.core.task import IreeConfig, Task
from ansor_mlir.steps.step_kind import StepKind


class UseIreeDefaultKind(StepKind[UseIreeDefault]):
    step = UseIreeDefault

    def config(self, step: UseIreeDefault, sketch: Sketch, candidate: Candidate, task: Task,
               fixed: dict[str, dict[int, int]]) -> IreeConfig | None:
        """IREE's configuration (None where IREE's own cannot be set: IREE then runs with none)."""
        return step.config

"""`CrossThreadReduction`: a reduction split across the threads of a block (IREE's `VectorDistribute`), emitted as
the launch's configuration (`space.gpu_mapping`)."""

from __future__ import annotations

from ansor_mlir.core.schedule import Candidate, CrossThreadReduction, Sketch
from ansor_mlir.core.task import IreeConfig, Task
from ansor_mlir.steps.map_to_gpu import GPU_LAUNCH_LIMITS, gpu_config
from ansor_mlir.steps.step_kind import StepKind


class CrossThreadReductionKind(StepKind[CrossThreadReduction]):
    step = CrossThreadReduction
    checks = (GPU_LAUNCH_LIMITS,)

    def config(self, step: CrossThreadReduction, sketch: Sketch, candidate: Candidate, task: Task,
               fixed: dict[str, dict[int, int]]) -> IreeConfig | None:
        return gpu_config(sketch, candidate, task)

"""`TensorCore`: a contraction on tensor cores, each warp a grid of MMA instructions (IREE's `TileAndFuse` GPU
pipeline with an `mma_kind`); emitted as the launch's configuration (`space.gpu_mapping`)."""

from __future__ import annotations

from ansor_mlir.core.schedule import Candidate, Sketch, TensorCore
from ansor_mlir.core.task import IreeConfig, Task
from ansor_mlir.steps.map_to_gpu import GPU_LAUNCH_LIMITS, gpu_config
from ansor_mlir.steps.step_kind import StepKind


class TensorCoreKind(StepKind[TensorCore]):
    step = TensorCore
    checks = (GPU_LAUNCH_LIMITS,)

    def config(self, step: TensorCore, sketch: Sketch, candidate: Candidate, task: Task,
               fixed: dict[str, dict[int, int]]) -> IreeConfig | None:
        return gpu_config(sketch, candidate, task)

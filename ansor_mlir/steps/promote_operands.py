"""`PromoteOperands`: Ansor's cache read on a GPU, the root's input tiles of one reduction step staged in shared
memory (IREE's `promote_operands`). Its decision is part of the launch `MapToGpu` and `TensorCore` emit
(`space.gpu_mapping`), and of its shared-memory budget."""

from __future__ import annotations

from ansor_mlir.core.schedule import MapToGpu, PromoteOperands, TensorCore
from ansor_mlir.steps.step_kind import StepKind


class PromoteOperandsKind(StepKind[PromoteOperands]):
    step = PromoteOperands
    emitted_by = (MapToGpu, TensorCore)

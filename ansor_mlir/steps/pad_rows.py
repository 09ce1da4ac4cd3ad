"""`PadRows`: a dispatch's own input pad (`Task.pads_input`), copied into each workgroup's tile, is copied in rows
of its two innermost dimensions holding at most `elements` values (`transform_strategy.pad_row_tile`). The pad's
fusion into the workgroup tile is the strategy's for every such task (traces recorded before the step existed
copy rows of the innermost dimension alone)."""

from __future__ import annotations

from dataclasses import replace

from ansor_mlir.core.schedule import PadRows
from ansor_mlir.space.resolved import Resolved
from ansor_mlir.steps.step_kind import Settings, StepKind


class PadRowsKind(StepKind[PadRows]):
    step = PadRows

    def configure(self, step: PadRows, resolved: Resolved, settings: Settings) -> Settings:
        return replace(settings, pad_row_elements=step.elements)

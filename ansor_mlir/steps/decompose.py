"""`Decompose`: a 2-D convolution's register tile (unit `oh` and `kh`) specialized back to the named convolution
and decomposed into a 1-D one, which the vectorizer lowers with strided reads over several output pixels."""

from __future__ import annotations

from dataclasses import replace

from iree.compiler.dialects.transform import structured

from ansor_mlir.core.schedule import Decompose
from ansor_mlir.core.task import LinalgOpInfo
from ansor_mlir.space.dag import decomposable_rows
from ansor_mlir.space.resolved import Resolved
from ansor_mlir.steps.script import any_op, named
from ansor_mlir.steps.step_kind import Emission, Settings, StepKind


class DecomposeKind(StepKind[Decompose]):
    step = Decompose

    def forced_units(self, step: Decompose, root: LinalgOpInfo, forced: set[int]) -> set[int]:
        """Only `oh` and `kh` stay unit: the 1-D convolution vectorizes strided windows itself."""
        rows = decomposable_rows(root)
        return forced if rows is None else set(rows)

    def configure(self, step: Decompose, resolved: Resolved, settings: Settings) -> Settings:
        # Folding unit dims would fold the 1-D convolution back into a generic the vectorizer cannot handle.
        return replace(settings, fold_unit_dims=False)

    def after_root(self, step: Decompose, e: Emission) -> None:
        with named("conv2d"):
            conv = structured.SpecializeOp(any_op(), e.handles[e.dag.root]).result
        with named("conv1d"):
            e.handles[e.dag.root] = structured.DecomposeOp(conv).result

"""`Rfactor`: the innermost reduction split, a vector of partial sums across the reduction loop
(`transform.structured.tile_reduction_using_for`), for long reductions with nothing else to vectorize."""

from __future__ import annotations

from dataclasses import dataclass, replace

from iree.compiler.dialects.transform import structured

from ansor_mlir.core.schedule import Rfactor
from ansor_mlir.core.task import LinalgOpInfo
from ansor_mlir.space.resolved import Resolved
from ansor_mlir.steps.checks import CheckContext
from ansor_mlir.steps.script import any_op
from ansor_mlir.steps.step_kind import Emission, LevelTiling, StepKind


@dataclass(frozen=True)
class PartialSumVectors:
    """The split reduction tile is whole vectors of partial sums (or the whole loop)."""

    def __call__(self, ctx: CheckContext) -> bool:
        root, reg = ctx.resolved.root, ctx.resolved.register
        split = reg[root.reduction_dims[-1]]
        return split % ctx.lanes == 0 or split == root.extents[root.reduction_dims[-1]]


class RfactorKind(StepKind[Rfactor]):
    step = Rfactor
    checks = (PartialSumVectors(),)
    fill_fusable = False  # the split's partial sums have a fill of their own

    def refine(self, step: Rfactor, resolved: Resolved) -> Resolved:
        return replace(resolved, partial_sum_dims=(resolved.root.reduction_dims[-1],))

    def vector_dims(self, step: Rfactor, root: LinalgOpInfo) -> tuple[int, ...]:
        return (root.reduction_dims[-1],)

    def level_tiling(self, step: Rfactor, e: Emission, level: str, tiling: LevelTiling) -> LevelTiling | None:
        # The register reduction tile is the split, cut after the root's other levels (`after_root`).
        return None if level == "vector_reduction" else tiling

    def after_root(self, step: Rfactor, e: Emission) -> None:
        root = e.root
        split_sizes = e.resolved.per_level.get("vector_reduction", [0] * len(root.extents))
        last_red = root.reduction_dims[-1]
        inner_red = [0] * len(root.extents)
        inner_red[last_red] = split_sizes[last_red]
        if not inner_red[last_red]:
            return
        split = structured.TileReductionUsingForOp([any_op()], any_op(), any_op(), any_op(), e.handles[e.dag.root],
                                                   tile_sizes=inner_red).split_op
        outer_red = [size if d != last_red else 0 for d, size in enumerate(split_sizes)]
        if any(outer_red):
            e.script.tile_for(split, outer_red)

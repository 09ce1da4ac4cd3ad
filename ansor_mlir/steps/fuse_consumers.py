"""`FuseConsumers`: where epilogues run, fused into the root's register tiles (`inner`) or after it per workgroup.

Fused, the consumer chain is tiled at the root's parallel levels with every
producer (the root among them) fused into each tile, down to the register
tile; the root's own levels are then its reduction levels alone
(`TileAndFuse.tile_root`). Without the knob, or with `outer`, consumers run
after the root and are tiled on their own (`TileAndFuse.tile_others`).
"""

from __future__ import annotations

from dataclasses import replace

from ansor_mlir.core.schedule import LEVEL_KIND, SPATIAL, FuseConsumers
from ansor_mlir.space.dag import dim_map
from ansor_mlir.space.decisions import FUSION
from ansor_mlir.space.resolved import Resolved
from ansor_mlir.steps.step_kind import Emission, StepKind
from ansor_mlir.steps.tile_and_fuse import NOT_ROOT_LEVELS, mapped


class FuseConsumersKind(StepKind[FuseConsumers]):
    step = FuseConsumers

    def refine(self, step: FuseConsumers, resolved: Resolved) -> Resolved:
        assert resolved.dag is not None
        inner = bool(resolved.dag.consumers) and resolved.choice(FUSION) == "inner"
        return replace(resolved, consumers_inner=inner)

    def fuse_consumers(self, step: FuseConsumers, e: Emission) -> None:
        if not e.resolved.consumers_inner:
            return
        dag, s = e.dag, e.script
        last = dag.ops[dag.last]
        last_map = dim_map(dag.ops, dag.root, dag.last)
        extras = e.resolved.consumer_tiles
        for level in (lv for lv in e.resolved.sketch.levels if LEVEL_KIND[lv] == SPATIAL and lv not in NOT_ROOT_LEVELS):
            own = extras.get(dag.last, {}) if level == "vector_common_parallel" else {}
            sizes = mapped(e.resolved.per_level[level], last_map, len(last.extents), own)
            if not any(sizes):
                continue
            e.handles[dag.last], loops = s.tile_for(e.handles[dag.last], sizes)
            for i in range(dag.last - 1, -1, -1):
                e.handles[i], _ = s.fuse_into(e.handles[i], loops[-1])
            e.after_chain_tile(level, sizes, loops)

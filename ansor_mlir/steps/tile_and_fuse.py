"""`TileAndFuse`: Ansor's multi-level tiling of the root, in IREE's CPU tiling levels (`SSRSRS`).

The last op is tiled to workgroups with `tile_using_forall` (and the
workgroup-count region) and every producer fused into that tile; the root is
tiled for cache and registers at each of its levels, re-tiling a loop only
where its tile changes (the other steps adjust a level or emit around it:
`StepKind.level_tiling`, `before_level`, `after_root_tile`); fills and
consumers computed after the root get register tiles of their own. Its
checks are the register-tile checks every such tiling needs
(`steps.checks.REGISTER_TILE_CHECKS`).
"""

from __future__ import annotations

from iree.compiler.dialects.transform import structured

from ansor_mlir.core.schedule import LEVEL_KIND, REDUCTION, TileAndFuse
from ansor_mlir.mlir import generic_op
from ansor_mlir.space.dag import dim_map, output_dims
from ansor_mlir.steps.checks import REGISTER_TILE_CHECKS
from ansor_mlir.steps.step_kind import Emission, LevelTiling, StepKind

BLOCKS = ("z", "y", "x")
# Levels the root is not tiled at by its own loops: the workgroups (tiled from the last op) and the vector shape.
NOT_ROOT_LEVELS = ("distribution", "vector_inner_parallel")


def mapped(sizes_by_root_dim: list[int], mapping: dict[int, int], rank: int, extra: dict[int, int]) -> list[int]:
    """Tile sizes of another op's loops (`rank` of them) from the root's, through `mapping` (its dim -> the
    root's), with `extra` tiles of its own loops."""
    out = [0] * rank
    for mine, root_dim in mapping.items():
        out[mine] = sizes_by_root_dim[root_dim]
    for d, size in extra.items():
        out[d] = size
    return out


class TileAndFuseKind(StepKind[TileAndFuse]):
    step = TileAndFuse
    checks = REGISTER_TILE_CHECKS

    def distribute(self, step: TileAndFuse, e: Emission) -> None:
        """Workgroups: tile the last op, fuse every producer into its tile."""
        dag, s = e.dag, e.script
        last = dag.ops[dag.last]
        dist = e.resolved.per_level.get("distribution", [0] * len(e.root.extents))
        wg_sizes = mapped(dist, dim_map(dag.ops, dag.root, dag.last), len(last.extents), {})
        if not any(wg_sizes):
            wg_sizes[0] = last.extents[0]
        mapping = generic_op.gpu_block_mapping(BLOCKS[-sum(1 for x in wg_sizes if x):])
        e.handles[dag.last], forall = structured.TileUsingForallOp(e.handles[dag.last], tile_sizes=wg_sizes,
                                                                   mapping=mapping).results
        s.iree("transform.iree.populate_workgroup_count_region_using_num_threads_slice", forall)
        for i in range(dag.last - 1, -1, -1):
            e.handles[i], forall = s.fuse_into(e.handles[i], forall)
        e.forall = forall

    def tile_root(self, step: TileAndFuse, e: Emission) -> None:
        """The root's cache and register levels (only its reduction levels when the consumer chain, with the root
        fused in, was tiled at the parallel ones)."""
        levels = e.resolved.sketch.levels
        if e.resolved.consumers_inner:
            root_levels = [lv for lv in levels if LEVEL_KIND[lv] == REDUCTION]
        else:
            root_levels = [lv for lv in levels if lv not in NOT_ROOT_LEVELS]
        for level in root_levels:
            tiling = e.level_tiling(level, LevelTiling(tuple(e.resolved.per_level[level])))
            if tiling is None:
                continue
            e.before_level(level)
            if any(tiling.sizes):
                e.after_root_tile(level, tiling.sizes, e.tile_root(level, tiling))

    def tile_others(self, step: TileAndFuse, e: Emission) -> None:
        """Fills and consumers computed after the root get register tiles of their own."""
        if e.resolved.consumers_inner:
            return
        dag, root, reg = e.dag, e.root, e.resolved.register
        for i, op in enumerate(dag.ops):
            if i in (dag.root, e.fill):
                continue
            if op.is_fill:
                if dag.root in [j for j, o in enumerate(dag.ops) if i in o.producers]:
                    sizes = [reg[d] if d is not None and reg[d] != root.extents[d] else 0
                             for d in output_dims(root)][:len(op.extents)]
                    if any(sizes):
                        e.handles[i], loops = e.script.tile_for(e.handles[i], sizes)
                        e.after_fill_tile(i, sizes, loops)
                continue
            sizes = [0] * len(op.extents)
            for mine, theirs in dim_map(dag.ops, dag.root, i).items():
                if reg[theirs] != root.extents[theirs]:
                    sizes[mine] = reg[theirs]
            for d, size in e.resolved.consumer_tiles.get(i, {}).items():
                sizes[d] = size
            if any(sizes):
                e.handles[i], _ = e.script.tile_for(e.handles[i], sizes)

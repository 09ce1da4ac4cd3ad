"""`MapToGpu`: block and thread mapping of the root's tiles (IREE's GPU pipeline, or a GPU transform strategy).

As a pipeline sketch it is the `#iree_gpu.lowering_config` of its launch
(`space.gpu_mapping`); as a strategy the root is tiled to blocks
(`tile_using_forall`, `#gpu.block`, with the workgroup-count region), then to
threads (`#gpu.thread`, one thread tile each), its reduction loop stepped,
the fill fused at every level (`codegen.gpu_transform_strategy` does the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

from iree.compiler.dialects.transform import structured

from ansor_mlir.core.schedule import Candidate, MapToGpu, Sketch
from ansor_mlir.core.task import IreeConfig, Task
from ansor_mlir.mlir import generic_op
from ansor_mlir.space.gpu_mapping import gpu_mapping, is_valid_gpu
from ansor_mlir.steps.checks import CheckContext
from ansor_mlir.steps.step_kind import GpuEmission, StepKind

DIMS = ("z", "y", "x")


@dataclass(frozen=True)
class GpuLaunchLimits:
    """`space.gpu_mapping.is_valid_gpu`: threads per block in whole warps and within the target's limits, block
    tiles that divide their loops, shared memory and accumulators within the block's budget."""

    def __call__(self, ctx: CheckContext) -> bool:
        return is_valid_gpu(ctx.sketch, ctx.values, ctx.task, ctx.target)


GPU_LAUNCH_LIMITS = GpuLaunchLimits()


def gpu_config(sketch: Sketch, candidate: Candidate, task: Task) -> IreeConfig:
    return gpu_mapping(sketch, candidate, task).config


class MapToGpuKind(StepKind[MapToGpu]):
    step = MapToGpu
    checks = (GPU_LAUNCH_LIMITS,)

    def config(self, step: MapToGpu, sketch: Sketch, candidate: Candidate, task: Task,
               fixed: dict[str, dict[int, int]]) -> IreeConfig | None:
        return gpu_config(sketch, candidate, task)

    def map_to_gpu(self, step: MapToGpu, e: GpuEmission) -> None:
        dag, mapping = e.dag, e.mapping
        producers = [i for i in range(len(dag.ops)) if i != dag.root]
        parallel = [d for d, it in enumerate(dag.ops[dag.root].iterator_types) if it == "parallel"]
        blocks = [mapping.block_tile[d] if d in parallel else 0 for d in range(len(mapping.block_tile))]
        distributed = [d for d in parallel if blocks[d]]
        root, forall = structured.TileUsingForallOp(
            e.handles[dag.root], tile_sizes=blocks, mapping=generic_op.gpu_block_mapping(DIMS[-len(distributed):])
        ).results
        e.script.iree("transform.iree.populate_workgroup_count_region_using_num_threads_slice", forall)
        for i in reversed(producers):
            e.handles[i], forall = structured.FuseIntoContainingOp(e.handles[i], forall).results
        # Loops with one thread per block are not mapped: their one-iteration thread loop would fold away.
        e.spread = [d for d in distributed if mapping.block_tile[d] > mapping.thread_tile[d]]
        threads = [mapping.thread_tile[d] if d in e.spread else 0 for d in range(len(blocks))]
        root, thread_forall = structured.TileUsingForallOp(
            root, tile_sizes=threads, mapping=generic_op.gpu_thread_mapping(DIMS[-len(e.spread):])).results
        for i in reversed(producers):
            e.handles[i], thread_forall = structured.FuseIntoContainingOp(e.handles[i], thread_forall).results
        if any(mapping.reduction_step):
            structured.TileUsingForOp(root, sizes=list(mapping.reduction_step))
        e.handles[dag.root] = root

"""GPU sketch rules: Ansor's GPU structure `SSSRRSRS` as IREE GPU pipeline configurations.

Ansor tiles a GPU program into block (S), virtual-thread and thread (S)
levels, two reduction levels around a shared-memory stage (R R), and
per-thread register tiles (S R S). IREE's GPU pipelines take the same
structure as a `#iree_gpu.lowering_config`: `workgroup` tiles are the
blocks, `thread` (or, on tensor cores, `subgroup`) tiles the threads' and
warps' register tiles, `reduction` the step at which operands are staged in
shared memory (`promote_operands`: Ansor's cache read) and accumulators stay
in registers across it (cache write). Rules read the target's `GpuSpec`
(warp size, thread and shared-memory limits, tensor-core shapes) and the
task's loop structure, never an operator's name. Sketch zero (IREE's own
configuration) comes first, from `sketch_rules.IreeDefaultRule`.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from iree.compiler import ir

from ansor_mlir.core.gpu_target import GpuSpec, MmaShape
from ansor_mlir.core.schedule import (
    PIPELINE,
    CacheWrite,
    ChoiceKnob,
    CrossThreadReduction,
    Family,
    MapToGpu,
    PromoteOperands,
    Sketch,
    TensorCore,
    TileKnob,
)
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.mlir.context import new_context
from ansor_mlir.space import dag as dags
from ansor_mlir.space.gpu_mapping import (
    K_TILES,
    PREFETCH,
    PROMOTE,
    ROWS,
    SUBGROUP_M,
    SUBGROUP_N,
    UNROLL,
    WARPS_M,
    WARPS_N,
)

TILE_AND_FUSE = "TileAndFuse"
VECTOR_DISTRIBUTE = "VectorDistribute"
# Block and thread dimensions a strategy maps parallel loops to, outermost first.
DIMS = ("z", "y", "x")
# Tensor-core instructions IREE 3.13's `TileAndFuse` lowers on CUDA (its WMMA ones fail to expand shapes there).
TILE_AND_FUSE_MMA_PREFIXES = ("NV_MMA_SYNC_",)


def _gpu(target: Target) -> GpuSpec:
    assert target.gpu is not None, f"target {target.key} has no GPU"
    return target.gpu


@dataclass(frozen=True)
class GpuMultiLevelTilingRule:
    """Block and thread tiles of every parallel loop, a reduction step, shared-memory promotion as a knob.

    Applies to every task with a parallel loop (IREE's `TileAndFuse`
    distributes each block's tile over its threads, one thread tile each).
    """

    name: str = "gpu-multi-level-tiling"

    def applies(self, task: Task, target: Target) -> bool:
        return any(it == "parallel" and e > 1 for e, it in zip(task.root.loop_extents, task.root.iterator_types,
                                                              strict=True))

    def apply(self, task: Task, target: Target, index: int) -> list[Sketch]:
        knobs = []
        for dim, (extent, iterator) in enumerate(zip(task.root.loop_extents, task.root.iterator_types, strict=True)):
            if extent > 1:
                levels = ("reduction",) if iterator == "reduction" else ("workgroup", "thread")
                knobs.append(TileKnob(f"d{dim}", dim, extent, levels))
        steps: list = [MapToGpu(tuple(knobs), TILE_AND_FUSE, _gpu(target).warp_size)]
        if task.root.reduction_dims:
            steps += [PromoteOperands((PROMOTE,)), CacheWrite()]
        return [Sketch(task.key, index, Family.PIPELINE, TILE_AND_FUSE, ("workgroup", "reduction", "thread"),
                       tuple(steps), (self.name,))]


@dataclass(frozen=True)
class ContractionLoops:
    """The loops of a contraction a tensor-core tile spans: M (rows of the first input), N, K."""

    m: int
    n: int
    k: int


def contraction_loops(task: Task) -> ContractionLoops | None:
    """M, N and K of a two-input contraction whose innermost loops of each kind they are, or None."""
    root = task.root
    if len(root.indexing_maps) != 3 or not {"arith.mulf", "arith.addf"} <= set(root.body_ops):
        return None
    a, b, out = (m.dims() for m in root.indexing_maps)
    parallel = {d for d, it in enumerate(root.iterator_types) if it == "parallel"}
    ms = sorted((a & out & parallel) - b)
    ns = sorted((b & out & parallel) - a)
    ks = sorted((a & b) - parallel)
    if not (ms and ns and ks) or any(not e.is_dim() for m in root.indexing_maps for e in m.results):
        return None
    return ContractionLoops(ms[-1], ns[-1], ks[-1])


def element_types(task: Task) -> tuple[str, ...]:
    """The element types of the root's operands, read through the bindings' types."""
    with new_context():
        return tuple(str(ir.ShapedType(ir.Type.parse(t)).element_type) for t in task.root.operand_types)


def mma_shapes(task: Task, target: Target) -> tuple[MmaShape, ...]:
    """The target's tensor-core instructions for the root's operand and accumulator types, and its loops."""
    types = element_types(task)
    if len(types) != 3:
        return ()
    a, b, c = types
    return tuple(s for s in _gpu(target).mma_shapes if (s.a_type, s.b_type, s.c_type) == (a, b, c)
                 and s.name.startswith(TILE_AND_FUSE_MMA_PREFIXES))


@dataclass(frozen=True)
class TensorCoreRule:
    """Tensor-core MMA for contractions whose element types an instruction of the target takes (f16 x f16
    -> f32 on sm_80): each warp a grid of instructions, operands promoted to shared memory, prefetched."""

    name: str = "tensor-core"

    def applies(self, task: Task, target: Target) -> bool:
        return contraction_loops(task) is not None and bool(mma_shapes(task, target))

    def apply(self, task: Task, target: Target, index: int) -> list[Sketch]:
        loops = contraction_loops(task)
        assert loops is not None
        shapes = mma_shapes(task, target)
        kind = ChoiceKnob("mma_kind", tuple(s.name for s in shapes))
        knobs = (kind, WARPS_M, WARPS_N, SUBGROUP_M, SUBGROUP_N, K_TILES, PREFETCH)
        steps = (TensorCore(knobs, tuple((s.m, s.n, s.k) for s in shapes), loops.m, loops.n, loops.k),
                 MapToGpu((), TILE_AND_FUSE, _gpu(target).warp_size), PromoteOperands(), CacheWrite())
        return [Sketch(task.key, index, Family.PIPELINE, TILE_AND_FUSE, ("workgroup", "reduction", "subgroup"),
                       steps, ("gpu-multi-level-tiling", self.name))]


@dataclass(frozen=True)
class CrossThreadReductionRule:
    """Cross-thread reduction (Ansor's rule for reductions with small outputs): the threads of a block share
    one output's reduction loop and combine their partial sums (IREE's `VectorDistribute`).

    Applies when the root's only reduction loop is its innermost and long
    (at least two warps' worth) and its outputs are too few to give every
    thread of the GPU one (`sm_count x max_threads`); every op of the dispatch
    walks the root's loops (softmax), so each gets the same layout.
    """

    name: str = "cross-thread-reduction"

    def applies(self, task: Task, target: Target) -> bool:
        gpu, root = _gpu(target), task.root
        if root.reduction_dims != (len(root.loop_extents) - 1,) or not root.parallel_dims:
            return False
        outputs = prod(root.loop_extents[d] for d in root.parallel_dims)
        same_loops = all(len(op.extents) == len(root.loop_extents) for op in task.codegen_ops if not op.is_fill)
        return same_loops and root.loop_extents[-1] >= 2 * gpu.warp_size and outputs < gpu.sm_count * gpu.max_threads

    def apply(self, task: Task, target: Target, index: int) -> list[Sketch]:
        gpu = _gpu(target)
        warps = tuple(str(1 << i) for i in range((gpu.max_threads // gpu.warp_size).bit_length()))
        widest = max(1, gpu.load_bytes // task.root.element_bytes)
        vectors = tuple(str(1 << i) for i in range(widest.bit_length()))
        knobs = (ChoiceKnob("warps", warps), ChoiceKnob("vector", vectors), ROWS, UNROLL)
        step = CrossThreadReduction(knobs, gpu.warp_size)
        return [Sketch(task.key, index, Family.PIPELINE, VECTOR_DISTRIBUTE,
                       ("workgroup", "partial_reduction", "thread"), (step,), (self.name,))]


@dataclass(frozen=True)
class GpuTransformTilingRule:
    """The transform family on a GPU: the same block / thread / reduction-step tiles as a transform-dialect
    strategy (`codegen.gpu_transform_strategy`) instead of IREE's pipeline.

    Applies where the root is the dispatch's last op (only fills beside it,
    fused into its tiles), walks the loops of the task's root, and has one to
    three parallel loops to map to block and thread dimensions x, y, z.
    """

    name: str = "gpu-td-multi-level-tiling"

    def applies(self, task: Task, target: Target) -> bool:
        dag = dags.task_dag(task)
        if dag is None or dag.root != dag.last or any(not op.is_fill for op in dag.ops[: dag.root]):
            return False
        root = dag.ops[dag.root]
        parallel = [e for e, it in zip(root.extents, root.iterator_types, strict=True) if it == "parallel" and e > 1]
        return root.extents == task.root.loop_extents and 1 <= len(parallel) <= len(DIMS)

    def apply(self, task: Task, target: Target, index: int) -> list[Sketch]:
        (sketch,) = GpuMultiLevelTilingRule().apply(task, target, index)
        (tiling, *_) = sketch.steps
        steps: list = [MapToGpu(tiling.knobs, PIPELINE, _gpu(target).warp_size)]
        if task.root.reduction_dims:
            steps.append(CacheWrite())
        return [Sketch(task.key, index, Family.TRANSFORM, PIPELINE, sketch.levels, tuple(steps), (self.name,))]


def gpu_rules() -> list:
    """The GPU rules after sketch zero, in sketch order."""
    return [GpuMultiLevelTilingRule(), TensorCoreRule(), CrossThreadReductionRule(), GpuTransformTilingRule()]

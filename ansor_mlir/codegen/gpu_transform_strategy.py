"""Emit a GPU transform sketch's candidate as the transform-dialect strategy IREE runs on CUDA.

The GPU counterpart of `codegen.transform_strategy`, for a dispatch whose root
is its last op (fills fused into it): the trace's `MapToGpu` tiles the root to
blocks (`tile_using_forall`, `#gpu.block`, with the workgroup-count region),
then to threads (`#gpu.thread`, one thread tile each: Ansor's `S S` levels),
steps its reduction loop (`R`) and fuses the fill at every level; everything
vectorized with accumulators kept in registers across the reduction loop
(cache write), bufferized for the GPU, the block and thread loops mapped to
workgroups and threads (`map_nested_forall_to_gpu_threads`, the block shape
from `space.gpu_mapping`) and the vectors lowered. Built with the bindings'
builders (IREE's `transform.iree.*` ops through the generic fallback), verified
as it is built; printed deterministically.
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import iree_codegen, transform
from iree.compiler.dialects.transform import loop, structured, vector

from ansor_mlir.core.schedule import Candidate, Sketch
from ansor_mlir.core.task import Task
from ansor_mlir.mlir import generic_op
from ansor_mlir.space.dag import task_dag
from ansor_mlir.space.gpu_mapping import gpu_mapping
from ansor_mlir.steps.registry import kinds_of
from ansor_mlir.steps.script import Script
from ansor_mlir.steps.step_kind import GpuEmission


def _any() -> ir.Type:
    return transform.AnyOpType.get()


def _named(name: str) -> ir.Location:
    return ir.Location.name(name)


def _iree(name: str, target: ir.Value, results: int = 0, **attributes: ir.Attribute) -> list[ir.Value]:
    return list(generic_op.op(name, [target], [_any()] * results, attributes).results)


def _patterns(target: ir.Value, patterns: list) -> None:
    apply = transform.ApplyPatternsOp(target)
    with ir.InsertionPoint(apply.patterns):
        for pattern in patterns:
            pattern()


def emit_gpu_strategy(sketch: Sketch, candidate: Candidate, task: Task, module: ir.Value) -> None:
    """The strategy's ops on the payload `module`, at the current insertion point: the steps' mapping to blocks
    and threads (`StepKind.map_to_gpu`), then vectorization, bufferization, thread mapping and vector lowering."""
    mapping = gpu_mapping(sketch, candidate, task)
    dag = task_dag(task)
    assert dag is not None and dag.root == dag.last, "GPU strategies tile a root that is the dispatch's last op"
    with _named("ops"):
        matched = structured.MatchOp(_any(), module, interface=structured.MatchInterfaceEnum.LinalgOp).result
    handles = list(transform.SplitHandleOp([_any()] * len(dag.ops), matched).results) if len(dag.ops) > 1 \
        else [matched]
    e = GpuEmission(Script(), mapping, dag, module, handles)
    for kind, step in kinds_of(sketch):
        kind.map_to_gpu(step, e)
    mfunc = _vectorize_and_bufferize(module)
    block = workgroup_dims(mapping.block_tile, mapping.thread_tile, e.spread)
    assert mapping.config.gpu is not None
    warp = mapping.config.gpu.subgroup_size
    i64 = ir.IntegerType.get_signless(64)
    _iree("transform.iree.map_nested_forall_to_gpu_threads", mfunc,
          workgroup_dims=ir.DenseI64ArrayAttr.get(block), subgroup_size=ir.IntegerAttr.get(i64, warp))
    _patterns(mfunc, [transform.ApplyCanonicalizationPatternsOp])
    transform.ApplyCommonSubexpressionEliminationOp(mfunc)
    _lower_vectors(mfunc)
    info = iree_codegen.TranslationInfoAttr.get(iree_codegen.NoPipelineAttr.get(), None, block, warp)
    with _named("none"):
        none = transform.ParamConstantOp(transform.AnyParamType.get(), info).result
    transform.AnnotateOp(mfunc, "translation_info", param=none)


def _vectorize_and_bufferize(module: ir.Value) -> ir.Value:
    """Unit dims folded, vectorized with accumulators kept in registers across the reduction loop (cache write),
    bufferized for the GPU, workgroups mapped; the bufferized function."""
    cleanup = [structured.ApplyTilingCanonicalizationPatternsOp, loop.ApplyForLoopCanonicalizationPatternsOp,
               transform.ApplyCanonicalizationPatternsOp]
    with _named("func"):
        func = structured.MatchOp.match_op_names(module, ["func.func"]).result
    _patterns(func, cleanup)
    _patterns(func, [structured.ApplyFoldUnitExtentDimsViaSlicesPatternsOp, transform.ApplyCanonicalizationPatternsOp])
    with _named("vfunc"):
        vfunc = structured.VectorizeChildrenAndApplyPatternsOp(func).result
    _patterns(vfunc, cleanup)
    transform.ApplyCommonSubexpressionEliminationOp(vfunc)
    with _named("loops"):
        loops = structured.MatchOp.match_op_names(vfunc, ["scf.for"]).result
    foreach = transform.ForeachOp([], [loops])
    with ir.InsertionPoint(foreach.body):
        loop.HoistLoopInvariantSubsetsOp(foreach.bodyTargets[0])
        transform.YieldOp([])
    _iree("transform.iree.eliminate_empty_tensors", module)
    with _named("bfunc"):
        (bfunc,) = _iree("transform.iree.bufferize", vfunc, results=1, target_gpu=ir.UnitAttr.get())
    with _named("mfunc"):
        mfunc = structured.MatchOp.match_op_names(bfunc, ["func.func"]).result
    _iree("transform.iree.forall_to_workgroup", mfunc)
    return mfunc


def _lower_vectors(mfunc: ir.Value) -> None:
    outer = vector.VectorContractLowering.OuterProduct
    _patterns(mfunc, [lambda: vector.ApplyLowerContractionPatternsOp(lowering_strategy=outer)])
    _patterns(mfunc, [vector.ApplyLowerOuterProductPatternsOp])
    _patterns(mfunc, [vector.ApplyTransferPermutationPatternsOp,
                      lambda: vector.ApplyLowerTransferPatternsOp(max_transfer_rank=1)])
    _patterns(mfunc, [vector.ApplyLowerShapeCastPatternsOp, vector.ApplyLowerBroadcastPatternsOp])
    _patterns(mfunc, [transform.ApplyCanonicalizationPatternsOp])
    transform.ApplyCommonSubexpressionEliminationOp(mfunc)


def workgroup_dims(block: tuple[int, ...], thread: tuple[int, ...], distributed: list[int]) -> list[int]:
    """Threads per block along x, y, z: the innermost distributed loop is x (`#gpu.thread<x>`)."""
    counts = [block[d] // thread[d] for d in reversed(distributed)]
    return counts + [1] * (3 - len(counts))

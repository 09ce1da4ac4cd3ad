"""IREE configuration attributes: how a configuration or a strategy is handed to IREE's codegen.

A pipeline-family candidate becomes `#iree_codegen.compilation_info` (a CPU
or GPU lowering config plus IREE's pipeline) on the root op; a transform-family
candidate becomes a `translation_info` naming its strategy on the dispatch
function. Built in the current context with `iree_codegen`'s and `iree_gpu`'s
attribute classes; only `#iree_cpu.*`, which has none, comes from the generic
fallback.
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import iree_codegen, iree_gpu

from ansor_mlir.core.task import GpuLaunch, IreeConfig
from ansor_mlir.mlir.generic_op import iree_cpu_lowering_config, iree_cpu_pipeline


def lowering_config(config: IreeConfig) -> ir.Attribute:
    """`#iree_cpu.lowering_config<distribution = [...], ...>` (or `#iree_gpu.lowering_config<{...}>`): the tile
    sizes per level."""
    if config.gpu is not None:
        return gpu_lowering_config(config.levels, config.gpu)
    return iree_cpu_lowering_config(config.levels)


def compilation_info(config: IreeConfig) -> ir.Attribute:
    """`#iree_codegen.compilation_info`: the lowering config and the CPU or GPU pipeline that reads it."""
    if config.gpu is not None:
        translation = gpu_translation_info(config.pipeline, config.gpu)
    else:
        translation = iree_codegen.TranslationInfoAttr.get(iree_cpu_pipeline(config.pipeline))
    return iree_codegen.CompilationInfoAttr.get(lowering_config(config), translation)


def gpu_lowering_config(levels: tuple[tuple[str, tuple[int, ...]], ...], launch: GpuLaunch) -> ir.Attribute:
    """`#iree_gpu.lowering_config<{workgroup = [...], thread = [...], ..., mma_kind = ..., promote_operands = ...}>`:
    tile sizes per level plus the operands promoted to shared memory, the tensor-core instruction and the
    `VectorDistribute` lane and warp bases."""
    entries: dict[str, ir.Attribute] = {name: _i64_array(sizes) for name, sizes in levels}
    if launch.promote_operands:
        entries["promote_operands"] = _i64_array(launch.promote_operands)
    if launch.mma_kind:
        entries["mma_kind"] = iree_gpu.MMAAttr.get(iree_gpu.MMAIntrinsic[launch.mma_kind])
    for name, basis in (("lane_basis", launch.lane_basis), ("subgroup_basis", launch.subgroup_basis)):
        if basis:
            entries[name] = ir.ArrayAttr.get([_i64_array(part) for part in basis])
    return iree_gpu.LoweringConfigAttr.get(ir.DictAttr.get(entries))


def follower_lowering_config(config: IreeConfig, loops: int) -> ir.Attribute | None:
    """The lowering config another op of a `VectorDistribute` dispatch needs beside the root's (softmax's
    normalisation after its sum): the root's lane and warp layout over the same loops, its partial reduction
    tile as a `serial` one, no workgroup tile. None where the root's config needs no followers or the op's
    loops are not the root's."""
    sizes = dict(config.levels)
    if config.gpu is None or "partial_reduction" not in sizes or len(sizes["partial_reduction"]) != loops:
        return None
    levels = tuple(("serial" if name == "partial_reduction" else name, tiles)
                   for name, tiles in config.levels if name != "workgroup")
    return gpu_lowering_config(levels, config.gpu)


def gpu_translation_info(pipeline: str, launch: GpuLaunch) -> ir.Attribute:
    """`translation_info<pipeline = #iree_gpu.pipeline<TileAndFuse> workgroup_size = [...] subgroup_size = 32>`,
    with `prefetch_num_stages` (software pipelining of shared-memory loads) when set."""
    options = None
    if launch.prefetch_stages:
        options = ir.DictAttr.get({"gpu_pipeline_options": iree_gpu.PipelineOptionsAttr.get(
            prefetch_num_stages=launch.prefetch_stages)})
    return iree_codegen.TranslationInfoAttr.get(
        iree_gpu.PipelineAttr.get(iree_gpu.LoweringPipeline[pipeline]), None, list(launch.workgroup_size),
        launch.subgroup_size, options)


def _i64_array(values: tuple[int, ...]) -> ir.Attribute:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.IntegerAttr.get(i64, v) for v in values])


def strategy_translation_info(strategy_name: str) -> ir.Attribute:
    """A dispatch's codegen is the transform strategy `@strategy_name` (IREE's interpreter runs it)."""
    return iree_codegen.TranslationInfoAttr.get(
        iree_codegen.TransformDialectCodegenPipelineAttr.get(), ir.FlatSymbolRefAttr.get(strategy_name)
    )


def no_pipeline_translation_info() -> ir.Attribute:
    """What a strategy sets on the function it lowered itself: no pipeline is to run after it."""
    return iree_codegen.TranslationInfoAttr.get(iree_codegen.NoPipelineAttr.get())

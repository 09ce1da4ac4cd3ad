"""IREE configuration attributes: how a configuration or a strategy is handed to IREE's codegen.

A pipeline-family candidate becomes `#iree_codegen.compilation_info` (a CPU
lowering config plus IREE's pipeline) on the root op; a transform-family
candidate becomes a `translation_info` naming its strategy on the dispatch
function. Built in the current context with `iree_codegen`'s attribute
classes; only `#iree_cpu.*`, which has none, comes from the generic fallback.
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import iree_codegen

from ansor_mlir.core.task import IreeConfig
from ansor_mlir.mlir.generic_op import iree_cpu_lowering_config, iree_cpu_pipeline


def lowering_config(config: IreeConfig) -> ir.Attribute:
    """`#iree_cpu.lowering_config<distribution = [...], ...>`: the tile sizes per level."""
    return iree_cpu_lowering_config(config.levels)


def compilation_info(config: IreeConfig) -> ir.Attribute:
    """`#iree_codegen.compilation_info`: the lowering config and the CPU pipeline that reads it."""
    translation = iree_codegen.TranslationInfoAttr.get(iree_cpu_pipeline(config.pipeline))
    return iree_codegen.CompilationInfoAttr.get(lowering_config(config), translation)


def strategy_translation_info(strategy_name: str) -> ir.Attribute:
    """A dispatch's codegen is the transform strategy `@strategy_name` (IREE's interpreter runs it)."""
    return iree_codegen.TranslationInfoAttr.get(
        iree_codegen.TransformDialectCodegenPipelineAttr.get(), ir.FlatSymbolRefAttr.get(strategy_name)
    )


def no_pipeline_translation_info() -> ir.Attribute:
    """What a strategy sets on the function it lowered itself: no pipeline is to run after it."""
    return iree_codegen.TranslationInfoAttr.get(iree_codegen.NoPipelineAttr.get())

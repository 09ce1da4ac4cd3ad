"""Read back IREE attributes that have no Python class, through MLIR's own parser.

IREE 3.13's bindings give no accessor for `#iree_cpu.pipeline`,
`#iree_cpu.lowering_config`, `#hal.executable.target` or `#flow.parameter.named` (the C API of
`libIREECompiler` has getters for GPU configurations only). Their parameters
are dictionaries, so the printed attribute's dictionary is handed to the MLIR
parser and read as a typed `ir.DictAttr`; no pattern matching reads IR text,
and this module is the only place that looks inside those attributes.
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import iree_codegen

# IREE's CPU codegen pipelines (every `#iree_cpu.pipeline` case IREE 3.13 accepts), by name.
CPU_PIPELINES = {
    "Default": "#iree_cpu.pipeline<Default>",
    "DoubleTilingExpert": "#iree_cpu.pipeline<DoubleTilingExpert>",
    "ConvTileAndDecomposeExpert": "#iree_cpu.pipeline<ConvTileAndDecomposeExpert>",
    "Mmt4dTilingExpert": "#iree_cpu.pipeline<Mmt4dTilingExpert>",
    "BufferOpsTileAndVectorize": "#iree_cpu.pipeline<BufferOpsTileAndVectorize>",
    "DataTiling": "#iree_cpu.pipeline<DataTiling>",
    "LinalgExtTileAndVectorize": "#iree_cpu.pipeline<LinalgExtTileAndVectorize>",
}
_LOWERING_CONFIG = "#iree_cpu.lowering_config<"
_EXECUTABLE_TARGET = "#hal.executable.target<"
NAMED_PARAMETER = "#flow.parameter.named<"


def cpu_pipeline(translation_info: ir.Attribute) -> str | None:
    """The CPU pipeline a `#iree_codegen.translation_info` names, or None (transform dialect, GPU, ...)."""
    if not iree_codegen.TranslationInfoAttr.isinstance(translation_info):
        return None
    pipeline = iree_codegen.TranslationInfoAttr(translation_info).pass_pipeline
    for name, text in CPU_PIPELINES.items():
        if ir.Attribute.parse(text, pipeline.context) == pipeline:
            return name
    return None


def cpu_lowering_levels(lowering_config: ir.Attribute) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    """Tile sizes per level of a `#iree_cpu.lowering_config`, in IREE's order; None unless every level is a
    plain list of integers (scalable or interchange entries are not read)."""
    text = str(lowering_config)
    if not (text.startswith(_LOWERING_CONFIG) and text.endswith(">")):
        return None
    # The parameters print as a dictionary's entries without the braces.
    fields = _dictionary("{" + text[len(_LOWERING_CONFIG):-1] + "}", lowering_config.context)
    levels = []
    for named in fields:
        sizes = _int_list(named.attr)
        if sizes is None:
            return None
        levels.append((named.name, sizes))
    return tuple(levels)


def executable_target_config(target: ir.Attribute) -> ir.DictAttr | None:
    """The configuration dictionary of a `#hal.executable.target<"backend", "format", {...}>`."""
    text = str(target)
    if not text.startswith(_EXECUTABLE_TARGET) or "{" not in text:
        return None
    return _dictionary(text[text.index("{"): text.rindex("}") + 1], target.context)


def parameter_scope(value: ir.Attribute) -> str | None:
    """The archive scope a `#flow.parameter.named<"scope"::"key">` value reads from, or None for any other."""
    text = str(value)
    if not text.startswith(NAMED_PARAMETER) or "::" not in text:
        return None
    scope = ir.Attribute.parse(text[len(NAMED_PARAMETER):text.index("::")], value.context)
    return ir.StringAttr(scope).value if isinstance(scope, ir.StringAttr) else None


def _dictionary(text: str, ctx: ir.Context) -> ir.DictAttr:
    return ir.DictAttr(ir.Attribute.parse(text, ctx))


def _int_list(attr: ir.Attribute) -> tuple[int, ...] | None:
    if not isinstance(attr, ir.ArrayAttr):
        return None
    values = []
    for item in attr:
        if not isinstance(item, ir.IntegerAttr):
            return None
        values.append(item.value)
    return tuple(values)

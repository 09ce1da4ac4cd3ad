"""The single generic-form fallback: the one module that names IR by text.

Everything else in the package builds IR with the bindings' typed builders
(`iree.compiler.dialects.transform`, its `structured`, `loop` and `vector`
extensions, `preprocessing_transform`, `iree_codegen`). Three things have no
builder in IREE's Python bindings, and they are made here, from checked
Python values, nowhere else:

- ops with no Python class (IREE's `transform.iree.*`): created generically
  from name, operands, result types and attributes (`op`);
- attributes of dialects with no Python class (`#iree_cpu.*`, `#gpu.block`, `#gpu.thread`):
  assembled from typed pieces and parsed;
- transform sequences printed earlier (strategies travel between processes
  as text): a bare `transform.named_sequence` only parses inside a module
  marked `transform.with_named_sequence`, so the wrapper is written here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from iree.compiler import ir

from ansor_mlir.mlir.context import parse_module

WITH_NAMED_SEQUENCE = "transform.with_named_sequence"
GPU_BLOCK_DIMS = ("x", "y", "z")


def op(
    name: str,
    operands: Sequence[ir.Value] = (),
    results: Sequence[ir.Type] = (),
    attributes: Mapping[str, ir.Attribute] | None = None,
    regions: int = 0,
) -> ir.Operation:
    """An op with no Python builder (and `regions` empty regions), at the current insertion point and location."""
    return ir.Operation.create(name, results=list(results), operands=list(operands),
                               attributes=dict(attributes or {}), regions=regions)


def gpu_block_mapping(dims: Sequence[str]) -> ir.ArrayAttr:
    """`[#gpu.block<y>, #gpu.block<x>]`: the mapping of a workgroup-level `scf.forall`."""
    for dim in dims:
        if dim not in GPU_BLOCK_DIMS:
            raise ValueError(f"gpu block dimension {dim!r} is not one of {GPU_BLOCK_DIMS}")
    return ir.ArrayAttr.get([_parse_attribute("#gpu.block<" + dim + ">") for dim in dims])


def gpu_thread_mapping(dims: Sequence[str]) -> ir.ArrayAttr:
    """`[#gpu.thread<y>, #gpu.thread<x>]`: the mapping of a thread-level `scf.forall` inside a workgroup."""
    for dim in dims:
        if dim not in GPU_BLOCK_DIMS:
            raise ValueError(f"gpu thread dimension {dim!r} is not one of {GPU_BLOCK_DIMS}")
    return ir.ArrayAttr.get([_parse_attribute("#gpu.thread<" + dim + ">") for dim in dims])


def iree_cpu_pipeline(name: str) -> ir.Attribute:
    """`#iree_cpu.pipeline<Name>`: one of IREE's CPU codegen pipelines."""
    if not name.isidentifier():
        raise ValueError(f"IREE CPU pipeline {name!r} is not an identifier")
    return _parse_attribute("#iree_cpu.pipeline<" + name + ">")


def iree_cpu_lowering_config(levels: Sequence[tuple[str, Sequence[int]]]) -> ir.Attribute:
    """`#iree_cpu.lowering_config<level = [sizes], ...>`: tile sizes per tiling level of the root op."""
    fields = []
    for level, sizes in levels:
        if not level.isidentifier():
            raise ValueError(f"tiling level {level!r} is not an identifier")
        fields.append(level + " = [" + ", ".join(str(int(size)) for size in sizes) + "]")
    return _parse_attribute("#iree_cpu.lowering_config<" + ", ".join(fields) + ">")


def transform_library(sequences: Sequence[str], what: str, ctx: ir.Context) -> ir.Module:
    """Printed `transform.named_sequence` ops, parsed back into one transform library module."""
    body = "\n".join(sequences)
    return parse_module("module attributes {" + WITH_NAMED_SEQUENCE + "} {\n" + body + "\n}\n", what, ctx)


def _parse_attribute(text: str) -> ir.Attribute:
    try:
        return ir.Attribute.parse(text)
    except ir.MLIRError as exc:
        raise ValueError(f"attribute {text} does not parse: {exc}") from None

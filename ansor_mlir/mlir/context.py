"""Parsing and printing helpers over IREE's bundled MLIR Python bindings.

All user-facing parse failures become `AnsorError`s naming the input and the
first diagnostic, so bad MLIR never surfaces as a traceback.
"""

from __future__ import annotations

import io
import re

from iree.compiler import ir

from ansor_mlir.errors import AnsorError

ELEMENT_BYTES = {
    "f64": 8, "i64": 8, "f32": 4, "i32": 4, "f16": 2, "bf16": 2, "i16": 2, "i8": 1, "i1": 1,
}


def new_context(allow_unregistered: bool = False) -> ir.Context:
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = allow_unregistered
    return ctx


def parse_module(text: str, what: str, ctx: ir.Context | None = None) -> ir.Module:
    """Parse MLIR text, turning diagnostics into an AnsorError about `what`."""
    ctx = ctx or new_context()
    try:
        return ir.Module.parse(text, ctx)
    except ir.MLIRError as exc:
        diagnostics = getattr(exc, "error_diagnostics", [])
        if diagnostics:
            first = diagnostics[0]
            where = _line_col(str(first.location))
            detail = f"{where}: {first.message}" if where else first.message
        else:
            detail = str(exc).splitlines()[0]
        raise AnsorError(f"{what}: not valid MLIR: line {detail}") from None


def _line_col(location: str) -> str:
    match = re.search(r":(\d+):(\d+)\)", location)
    return f"{match.group(1)}:{match.group(2)}" if match else ""


def op_text(op: ir.Operation, state: ir.AsmState) -> str:
    buf = io.StringIO()
    op.print(state=state, file=buf)
    return buf.getvalue()


def ops_of(block: ir.Block) -> list[ir.Operation]:
    return [op.operation for op in block.operations]


def indent(text: str, spaces: int) -> str:
    """Indent every non-blank line; blank lines stay empty."""
    pad = " " * spaces
    return "\n".join(pad + line if line.strip() else "" for line in text.splitlines())


def element_bytes(element_type: str) -> int:
    return ELEMENT_BYTES.get(element_type, 4)


def tensor_shape(type_text: str) -> tuple[list[int], str]:
    """Split `tensor<4x8xf32>` into ([4, 8], "f32")."""
    match = re.fullmatch(r"tensor<(.*)>", type_text.strip())
    if not match:
        raise ValueError(f"not a tensor type: {type_text}")
    parts = match.group(1).split("x")
    dims = parts[:-1]
    if any(d == "?" for d in dims):
        raise AnsorError(f"dynamic shape {type_text}: only static shapes can be tuned")
    return [int(d) for d in dims], parts[-1]

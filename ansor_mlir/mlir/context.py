"""Parsing and printing helpers over IREE's bundled MLIR Python bindings.

All user-facing parse failures become `AnsorError`s naming the input and the
first diagnostic, so bad MLIR never surfaces as a traceback. IR the package
builds is verified when built (`verify`), so a bug in an emitter fails there,
never as a candidate that does not compile.
"""

from __future__ import annotations

import io
import threading

from iree.compiler import ir

from ansor_mlir.errors import AnsorError

ELEMENT_BYTES = {
    "f64": 8, "i64": 8, "f32": 4, "i32": 4, "f16": 2, "bf16": 2, "i16": 2, "i8": 1, "i1": 1,
}


_THREAD = threading.local()


def new_context(allow_unregistered: bool = False) -> ir.Context:
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = allow_unregistered
    return ctx


def shared_context() -> ir.Context:
    """This thread's context for building IR that is printed and dropped (strategies, specs, types).

    Creating a context with IREE's dialects costs about 7 ms, ten times what
    building a whole strategy in it does, and the search builds thousands.
    Contexts are not thread-safe, hence one per thread; what it keeps between
    uses is only uniqued attributes and types.
    """
    ctx = getattr(_THREAD, "ctx", None)
    if ctx is None:
        ctx = _THREAD.ctx = new_context()
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
            where = _line_col(first.location)
            detail = f"{where}: {first.message}" if where else first.message
        else:
            detail = str(exc).splitlines()[0]
        raise AnsorError(f"{what}: not valid MLIR: line {detail}") from None


def as_module(text: str, what: str) -> str:
    """MLIR text as a module's: bare top-level ops (a task's `func.func`) inside the module the parser adds."""
    return str(parse_module(text, what, shared_context()))


def _line_col(location: ir.Location) -> str:
    try:
        loc = ir.FileLineColLoc(location)
    except (TypeError, ValueError):
        return ""
    return f"{loc.start_line}:{loc.start_col}"


def op_text(op: ir.Operation, state: ir.AsmState) -> str:
    buf = io.StringIO()
    op.print(state=state, file=buf)
    return buf.getvalue()


def verify(op: ir.Operation, what: str) -> None:
    """Check IR the package built; failing is a bug in its emitter, reported with MLIR's diagnostics."""
    try:
        op.verify()
    except ir.MLIRError as exc:
        raise ValueError(f"{what}: the IR ansor-mlir built does not verify (a bug, please report): {exc}") from None


def print_op(op: ir.Operation) -> str:
    """Readable text of verified IR: handles named after their `NameLoc` (`%func`), not numbered."""
    return op.get_asm(use_name_loc_as_prefix=True, assume_verified=True)


def ops_of(block: ir.Block) -> list[ir.Operation]:
    return [op.operation for op in block.operations]


def indent(text: str, spaces: int) -> str:
    """Indent every non-blank line; blank lines stay empty."""
    pad = " " * spaces
    return "\n".join(pad + line if line.strip() else "" for line in text.splitlines())


def element_bytes(element_type: str) -> int:
    return ELEMENT_BYTES.get(element_type, 4)


def tensor_shape(type_text: str) -> tuple[list[int], str]:
    """Split `tensor<4x8xf32>` into ([4, 8], "f32"), reading the type with MLIR's own parser."""
    with shared_context():
        try:
            parsed = ir.Type.parse(type_text)
        except ir.MLIRError:
            raise ValueError(f"not a tensor type: {type_text}") from None
        try:
            tensor = ir.RankedTensorType(parsed)
        except ValueError:
            raise ValueError(f"not a tensor type: {type_text}") from None
        if not tensor.has_static_shape:
            raise AnsorError(f"dynamic shape {type_text}: only static shapes can be tuned")
        return list(tensor.shape), str(tensor.element_type)

"""Parsing and printing helpers over IREE's bundled MLIR Python bindings.

All user-facing parse failures become `AnsorError`s naming the input and the
first diagnostic, so bad MLIR never surfaces as a traceback. MLIR's parser
recurses once per nesting level and overflows the C stack (SIGSEGV) a few
thousand levels deep, so user text is checked before it is parsed
(`check_text`): at most `MAX_NESTING` open brackets deep, at most
`MAX_TEXT_CHARS` long, no NUL character. IR the package builds is verified
when built (`verify`), so a bug in an emitter fails there, never as a
candidate that does not compile.
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections.abc import Iterator

import numpy as np
from iree.compiler import ir

from ansor_mlir.errors import AnsorError

ELEMENT_BYTES = {
    "f64": 8, "i64": 8, "f32": 4, "i32": 4, "f16": 2, "bf16": 2, "i16": 2, "i8": 1, "i1": 1,
}


_THREAD = threading.local()

# Deepest bracket nesting accepted: real modules nest a few dozen levels; MLIR's parser crashes (rather than
# failing) on nesting some thousands deep (CHANGELOG.md), and the bindings' walks recurse in Python (limit 1,000
# frames).
MAX_NESTING = 256
# Longest text accepted (characters): 1 GiB.
MAX_TEXT_CHARS = 1 << 30
_OPEN = np.frombuffer(b"([{<", np.uint8)
_CLOSE = np.frombuffer(b")]}>", np.uint8)


def new_context(allow_unregistered: bool = False) -> ir.Context:
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = allow_unregistered
    return ctx


def shared_context() -> ir.Context:
    """This thread's context for building IR that is printed and dropped (strategies, specs, types).

    Creating a context with IREE's dialects costs several times what
    building a whole strategy in it does (CHANGELOG.md), and the search
    builds thousands.
    Contexts are not thread-safe, hence one per thread; what it keeps between
    uses is only uniqued attributes and types.
    """
    ctx = getattr(_THREAD, "ctx", None)
    if ctx is None:
        ctx = _THREAD.ctx = new_context()
    return ctx


def nesting_depth(text: str) -> int:
    """How deeply brackets nest in `text` (round, square, curly and angle; `->`, `<=`, `>=` are not brackets).

    A byte scan, not a parse: brackets inside string literals count too,
    which errs on the side of refusing.
    """
    data = np.frombuffer(text.encode("utf-8", errors="replace"), np.uint8)
    if not data.size:
        return 0
    step = np.isin(data, _OPEN).astype(np.int64) - np.isin(data, _CLOSE).astype(np.int64)
    before = np.concatenate(([0], data[:-1]))
    after = np.concatenate((data[1:], [0]))
    not_bracket = ((data == ord(">")) & (before == ord("-"))) | (np.isin(data, np.frombuffer(b"<>", np.uint8))
                                                                  & (after == ord("=")))
    step[not_bracket] = 0
    return int(np.cumsum(step).max(initial=0))


def check_text(text: object, what: str) -> str:
    """User MLIR text that is safe to hand MLIR's parser; an `AnsorError` naming `what` otherwise."""
    if not isinstance(text, str):
        raise AnsorError(f"{what}: expected MLIR text (a str), got {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise AnsorError(f"{what}: {len(text)} characters, over the {MAX_TEXT_CHARS} this tool parses")
    if "\0" in text:
        raise AnsorError(f"{what}: contains a NUL character at offset {text.index(chr(0))}: not MLIR text")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise AnsorError(f"{what}: not valid Unicode text (character {exc.start})") from None
    depth = nesting_depth(text)
    if depth > MAX_NESTING:
        raise AnsorError(f"{what}: brackets nest {depth} deep, over the {MAX_NESTING} MLIR's parser is given "
                         "(deeper input can overflow its stack): flatten the attribute or region nesting")
    return text


def parse_module(text: str, what: str, ctx: ir.Context | None = None) -> ir.Module:
    """Parse MLIR text (checked by `check_text` first), turning diagnostics into an AnsorError about `what`."""
    check_text(text, what)
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


def program_key(text: str, what: str) -> str:
    """A digest naming a program by its IR as MLIR prints it: the same program read from a file, printed by
    `ansor-opt` or imported again gets the same key, whatever its formatting and locations."""
    return hashlib.sha256(as_module(text, what).encode()).hexdigest()[:16]


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


def walk(op: ir.Operation) -> Iterator[ir.Operation]:
    """Every op nested in `op`, in program order."""
    for region in op.regions:
        for block in region.blocks:
            for inner in ops_of(block):
                yield inner
                yield from walk(inner)


def producer(value: ir.Value) -> ir.Operation | None:
    """The op defining `value`; None for a block argument."""
    owner = value.owner
    return owner.operation if isinstance(owner, ir.OpView) else owner if isinstance(owner, ir.Operation) else None


def dense_ints(attr: ir.Attribute) -> list[int]:
    """The integers of a dense integer attribute (a convolution's `strides`, `dilations`)."""
    return [int(v) for v in ir.DenseIntElementsAttr(attr)]


def ancestors(op: ir.Operation | ir.OpView) -> Iterator[ir.Operation]:
    """The ops `op` is nested in, innermost first."""
    parent = op.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def indent(text: str, spaces: int) -> str:
    """Indent every non-blank line; blank lines stay empty."""
    pad = " " * spaces
    return "\n".join(pad + line if line.strip() else "" for line in text.splitlines())


def element_bytes(element_type: str) -> int:
    return ELEMENT_BYTES.get(element_type, 4)


def argument_shape(type_text: str) -> tuple[list[int], str]:
    """([4, 8], "f32") for `tensor<4x8xf32>`, ([], "f32") for a scalar `f32`, read by MLIR's own parser.

    A type that is neither (an unranked tensor, a memref) is a `ValueError`; a dynamic shape an `AnsorError`.
    """
    with shared_context():
        try:
            parsed = ir.Type.parse(type_text)
        except ir.MLIRError:
            raise ValueError(f"not an MLIR type: {type_text}") from None
        if isinstance(parsed, ir.RankedTensorType):
            if not parsed.has_static_shape:
                raise AnsorError(f"dynamic shape {type_text}: only static shapes can be tuned")
            return list(parsed.shape), str(parsed.element_type)
        if isinstance(parsed, ir.ShapedType):
            raise ValueError(f"{type_text} is neither a ranked tensor nor a scalar")
        return [], str(parsed)


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

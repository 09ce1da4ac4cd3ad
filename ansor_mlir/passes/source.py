"""ansor-opt's input: split into chunks (`--split-input-file`), parsed with `ansor` ops allowed, checked.

Every chunk is parsed in a context that allows unregistered dialects, so
the `ansor` ops any pass prints read back; `ansor` ops are then verified
against their IRDL definition, and ops of any other unregistered dialect are
refused unless `--allow-unregistered-dialect` is given, as mlir-opt does.
A chunk keeps the line numbers it has in the file, so every diagnostic (and
every `expected-error`) names the file's own lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from iree.compiler import ir

from ansor_mlir.dialect.ansor_ir import walk
from ansor_mlir.dialect.verify import irdl_error
from ansor_mlir.frontend.model_source import ModelSource, load_model
from ansor_mlir.frontend.torch_import import FACTORY_SEPARATOR, is_factory_reference
from ansor_mlir.mlir.context import check_text
from ansor_mlir.passes.diagnostics import LocatedError

SPLIT_MARKER = "// -----"
ANSOR_PREFIX = "ansor."


@dataclass(frozen=True)
class Chunk:
    """One chunk of the input; blank lines stand in for the lines before it."""

    text: str
    first_line: int


def split_input(text: str, marker: str = SPLIT_MARKER) -> list[Chunk]:
    """The chunks between lines starting with `marker` (the whole text when there is none)."""
    lines = text.splitlines(keepends=True)
    chunks, start = [], 0
    for number, line in enumerate([*lines, marker]):
        if line.startswith(marker):
            chunks.append(Chunk("\n" * start + "".join(lines[start:number]), start + 1))
            start = number + 1
    return chunks


def join_outputs(texts: list[str], marker: str = SPLIT_MARKER) -> str:
    """Chunk outputs joined as mlir-opt joins them."""
    return (marker + "\n").join(texts)


def parameters_name(reference: str) -> str:
    """The file name a model's weights get when no output names them (`model.onnx` -> `model.irpa`,
    `nets.py:resnet18` -> `nets_resnet18.irpa`)."""
    if is_factory_reference(reference):
        path, _, factory = reference.rpartition(FACTORY_SEPARATOR)
        return Path(path).stem + "_" + factory + ".irpa"
    return Path(reference).stem + ".irpa"


def parameters_path(reference: str, output: str) -> Path:
    """Where a model's weights go: beside the output (`-o tuned.mlir` -> `tuned.irpa`), in the working directory
    when the output is stdout; never beside the input, whose directory may be read-only or shared."""
    return Path(parameters_name(reference)) if output == "-" else Path(output).with_suffix(".irpa")


def read_model(reference: str) -> ModelSource:
    """A model named on the command line (`.onnx` or `file.py:factory`), imported to linalg; its text names its
    weights as parameters of scope `model` (`ModelSource.parameters`, for
    `iree-run-module --parameters=model=FILE` or `iree-compile --iree-parameter-import=model=FILE`)."""
    return load_model(reference)


def new_context() -> ir.Context:
    """A context where `ansor` (and any other unregistered) ops parse; IREE's dialects are registered."""
    context = ir.Context()
    context.allow_unregistered_dialects = True
    return context


def line_col(location: ir.Location) -> tuple[int, int] | None:
    try:
        loc = ir.FileLineColLoc(location)
    except (ValueError, TypeError):
        return None
    return loc.start_line, loc.start_col


def module_line(module: ir.Module) -> int | None:
    """Where a module is in its file: its `module` keyword, else its first op (None when built in memory)."""
    found = line_col(module.operation.location)
    if found and found[0] > 0:
        return found[0]
    first = next(iter(module.body.operations), None)
    found = line_col(first.operation.location) if first is not None else None
    return found[0] if found and found[0] > 0 else None


def all_ops(module: ir.Module) -> Iterator[ir.Operation]:
    return walk(module.body)


def parse(text: str, name: str, context: ir.Context) -> ir.Module:
    check_text(text, name)  # nesting that would overflow MLIR's parser, NUL, size
    try:
        return ir.Module.parse(text, context)
    except ir.MLIRError as exc:
        diagnostics = getattr(exc, "error_diagnostics", [])
        if not diagnostics:
            raise LocatedError(f"{name}: not valid MLIR: {str(exc).splitlines()[0]}") from None
        first = diagnostics[0]
        where = line_col(first.location)
        if where is None:
            raise LocatedError(f"{name}: not valid MLIR: {first.message}") from None
        raise LocatedError(f"{name}: not valid MLIR: line {where[0]}:{where[1]}: {first.message}", where[0]) from None


def read_module(text: str, name: str, context: ir.Context, allow_unregistered: bool = False) -> ir.Module:
    """Parse one chunk and check its ops: `ansor` ops against IRDL, others registered unless allowed."""
    module = parse(text, name, context)
    has_ansor = False
    for op in all_ops(module):
        if op.name.startswith(ANSOR_PREFIX):
            has_ansor = True
        elif not allow_unregistered and not context.is_registered_operation(op.name):
            where = line_col(op.location)
            line = where[0] if where else None
            raise LocatedError(
                f"{name}: line {line}: operation '{op.name}' of an unregistered dialect: "
                "use --allow-unregistered-dialect to accept it", line,
            )
    if has_ansor:
        error = irdl_error(text, allow_unregistered)
        if error is not None:
            raise LocatedError(f"{name}: line {error.line}: not valid ansor IR: {error.message}", error.line)
    return module


def print_module(module: ir.Module, elide_larger_than: int | None = None) -> str:
    """MLIR's printing of the module (elements attributes above the limit elided, as mlir-opt's flag does)."""
    return module.operation.get_asm(large_elements_limit=elide_larger_than, assume_verified=True)

"""Run a pipeline of `ansor-*` passes on a module object: the engine of `ansor-opt` and of `api.run_pipeline`.

    result = run_pipeline(module, "builtin.module(ansor-extract-tasks, ansor-generate-sketches)", toolkit)
    result.module                      # the last pass's output, an `ir.Module`
    for invocation, module in result.after: ...   # every pass's output, as IR objects

A pass that fails raises `PassError`, which names the pass and the IR it ran
on: the input (file and line of the module) or "output of pass N (name)".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iree.compiler import ir

from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.model_source import is_model_reference, load_model
from ansor_mlir.passes.ansor_passes import PASS_FUNCTIONS, PassContext, Toolkit
from ansor_mlir.passes.diagnostics import LocatedError
from ansor_mlir.passes.pass_options import PassInvocation, as_invocations
from ansor_mlir.passes.source import module_line, new_context, read_module

AfterPass = Callable[[int, PassInvocation, ir.Module], None]


class PassError(LocatedError):
    """A pass failed; the message names the pass and its IR, `line` is the input module's line."""


@dataclass(frozen=True)
class PipelineResult:
    """The final module and, in order, every pass with the module it produced (the last one is `module`)."""

    module: ir.Module
    after: tuple[tuple[PassInvocation, ir.Module], ...]

    def __str__(self) -> str:
        return str(self.module)


def input_module(source: ir.Module | str | Path | Any, name: str | None) -> tuple[ir.Module, str, bytes]:
    """(module, name for messages, weights archive) of a module object, MLIR text or an .mlir file, or a model
    (`.onnx`, `file.py:factory`, `onnx.ModelProto`, `(torch.nn.Module, example_inputs)`, `ModelSource`) imported
    to linalg (the archive of its weights; empty for the others)."""
    parameters = b""
    if isinstance(source, ir.Module):
        source.context.allow_unregistered_dialects = True
        return source, name or "<module>", parameters
    if isinstance(source, Path) and not is_model_reference(str(source)):
        try:
            text = source.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise AnsorError(f"cannot read {source}: {exc}") from None
        name = name or str(source)
    elif isinstance(source, str) and not is_model_reference(source):
        text, name = source, name or "<input>"
    else:
        model = load_model(source, name=name)
        text, name, parameters = model.text, model.name, model.parameters
    return read_module(text, name, new_context()), name, parameters


def run_pipeline(
    source: ir.Module | str | Path,
    pipeline: str | Sequence[str | PassInvocation],
    toolkit: Toolkit,
    name: str | None = None,
    after_pass: AfterPass | None = None,
    parameters: bytes = b"",
) -> PipelineResult:
    """Run the passes in order, each on the previous one's output (a module object in the input's context).

    `pipeline` is a `--pass-pipeline` string or a list of `name{options}`
    strings and invocations; `after_pass(n, invocation, module)` sees each
    output (as `--mlir-print-ir-after-all` does). `parameters` is the weights
    archive a program that reads its weights runs with (a model brings its own).
    """
    invocations = as_invocations(pipeline)
    module, name, imported = input_module(source, name)
    parameters = imported or parameters
    line = module_line(module)
    input_what = f"{name}:{line}" if line is not None else name
    after: list[tuple[PassInvocation, ir.Module]] = []
    for number, invocation in enumerate(invocations, start=1):
        what = input_what if number == 1 else f"output of pass {number - 1} ({invocations[number - 2].name})"
        module = run_pass(module, PassContext(invocation, toolkit, what, parameters), number, line)
        after.append((invocation, module))
        if after_pass is not None:
            after_pass(number, invocation, module)
    return PipelineResult(module, tuple(after))


def run_pass(module: ir.Module, pc: PassContext, number: int, line: int | None) -> ir.Module:
    """One pass, its output verified; failures become a `PassError` naming the pass and the IR."""
    name = pc.invocation.name
    try:
        output = PASS_FUNCTIONS[name](module, pc)
    except AnsorError as exc:
        message = str(exc)
        if not message.startswith(pc.what):
            message = f"{pc.what}: {message}"
        raise PassError(f"{name}: {message}", line) from None
    try:
        output.operation.verify()
    except ir.MLIRError as exc:
        raise PassError(f"{name} (pass {number}) produced invalid IR: {str(exc).splitlines()[0]}", line) from None
    return output

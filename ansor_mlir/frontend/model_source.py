"""One entry point for every model a user brings: `load_model(source) -> ModelSource`.

A source is linalg MLIR (text or a `.mlir` file), an ONNX model (`.onnx`
file or `onnx.ModelProto`), or a PyTorch module with example inputs (or
`file.py:factory`). Models are imported by IREE's bundled importers and
lowered to linalg on tensors; then IREE's own passes move every tensor
constant into a `util.global` read from a parameter
(`#flow.parameter.named<"model"::key>`) and write the values to an IREE
parameter archive (`.irpa`). So the text the tuner parses, prints and logs
holds no weights, task keys do not depend on weight values, and the final
program gets them back: `iree-compile --iree-parameter-import=model=W.irpa`
embeds them, or `iree-run-module --parameters=model=W.irpa` reads them.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iree.compiler import ir, passmanager
from iree.compiler import version as iree_version

from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.onnx_import import ONNX_TO_LINALG, import_onnx, is_onnx_model
from ansor_mlir.frontend.torch_import import TORCH_TO_LINALG, import_torch, is_factory_reference, is_torch_module
from ansor_mlir.frontend.torch_import import load_factory as load_torch_factory
from ansor_mlir.mlir.context import new_context, ops_of, parse_module, walk
from ansor_mlir.mlir.iree_attributes import NAMED_PARAMETER, parameter_scope

PARAMETER_SCOPE = "model"
# Weights move out of the IR from this many bytes up (0: every tensor constant the model carries).
DEFAULT_MIN_PARAMETER_BYTES = 0
# `iree-compile --iree-parameter-import-maximum-size`: import every parameter, whatever its size.
IMPORT_ALL_BYTES = 1 << 62
MODEL_SUFFIXES = (".onnx",)
UNSUPPORTED_OP = "torch.operator"
TORCH_DIALECT_PREFIXES = ("torch.", "torch_c.")


@dataclass(frozen=True)
class ModelSource:
    """A model as the tuner sees it: linalg-on-tensors MLIR, its weights in a parameter archive beside it.

    `parameters` is an `.irpa` archive whose keys are the parameter keys
    `text` names in `scope` (empty for MLIR input, whose constants stay inline).
    """

    text: str
    name: str
    entry: str
    parameters: bytes = b""
    scope: str = PARAMETER_SCOPE

    def write_parameters(self, path: Path) -> Path:
        """Write the parameter archive (for `iree-run-module --parameters=model=PATH`)."""
        try:
            path.write_bytes(self.parameters)
        except OSError as exc:
            raise AnsorError(f"{path}: cannot write the weights of {self.name}: {exc}") from None
        return path

    def import_flags(self, path: Path) -> list[str]:
        """iree-compile flags that embed the archive at `path` (already written) in the program."""
        if not self.parameters:
            return []
        return [f"--iree-parameter-import={self.scope}={path}",
                f"--iree-parameter-import-maximum-size={IMPORT_ALL_BYTES}"]


def reads_parameters(text: str, what: str, scope: str = PARAMETER_SCOPE) -> bool:
    """Whether a program reads weights from a parameter archive of `scope` (as imported models do): a global
    whose initial value is a named parameter of that scope."""
    if NAMED_PARAMETER not in text:
        return False
    try:
        module = parse_module(text, what, new_context())
    except AnsorError:  # split input or text the tool reports on later: read the archive if one is there
        return True
    return any(op.name == "util.global" and "initial_value" in op.attributes
               and parameter_scope(op.attributes["initial_value"]) == scope for op in ops_of(module.body))


def is_model_object(value: object) -> bool:
    """Whether `value` is a model in memory `load_model` takes: a `ModelSource`, an `onnx.ModelProto`, a
    `torch.nn.Module` or a `(module, example_inputs)` pair."""
    pair = isinstance(value, tuple) and len(value) == 2 and is_torch_module(value[0])
    return isinstance(value, ModelSource) or is_onnx_model(value) or is_torch_module(value) or pair


def is_model_reference(text: str) -> bool:
    """Whether a command-line input names a model (`.onnx` file or `file.py:factory`), not MLIR."""
    return is_factory_reference(text) or Path(text).suffix.lower() in MODEL_SUFFIXES


def load_model(
    source: Any,
    example_inputs: Sequence[Any] | Any | None = None,
    *,
    name: str | None = None,
    min_parameter_bytes: int = DEFAULT_MIN_PARAMETER_BYTES,
) -> ModelSource:
    """Any supported model as linalg text plus weights.

    `source`: a `ModelSource` (returned as is), MLIR text (`str`), a path
    (`.mlir`, `.onnx`, or `file.py:factory` whose factory returns
    `(module, example_inputs)`), an `onnx.ModelProto`, or a `torch.nn.Module`
    with `example_inputs` (or the pair `(module, example_inputs)`).
    """
    if isinstance(source, ModelSource):
        return source
    if isinstance(source, tuple) and len(source) == 2 and is_torch_module(source[0]) and example_inputs is None:
        source, example_inputs = source  # what a `file.py:factory` returns
    if is_onnx_model(source):
        what = name or f"ONNX model {source.graph.name or '<unnamed>'}"
        return _lower(lambda ctx: import_onnx(source, what, ctx), ONNX_TO_LINALG, what, min_parameter_bytes)
    if is_torch_module(source):
        what = name or f"PyTorch module {type(source).__name__}"
        if example_inputs is None:
            raise AnsorError(f"{what}: give its example inputs (the tensors it is called with), as "
                             "load_model(module, example_inputs) or the pair (module, example_inputs)")
        return _lower(lambda ctx: import_torch(source, example_inputs, what, ctx), TORCH_TO_LINALG, what,
                      min_parameter_bytes)
    if isinstance(source, Path) or (isinstance(source, str) and is_model_reference(source)):
        return _load_path(str(source), name, min_parameter_bytes)
    if isinstance(source, str):
        return mlir_source(source, name or "<input>")
    raise AnsorError(f"cannot read a model from a {type(source).__name__}: give MLIR text, a .mlir/.onnx path, "
                     "file.py:factory, an onnx.ModelProto or a torch.nn.Module with example inputs")


def _load_path(reference: str, name: str | None, min_parameter_bytes: int) -> ModelSource:
    what = name or reference
    if is_factory_reference(reference):
        module, inputs = load_torch_factory(reference)
        return _lower(lambda ctx: import_torch(module, inputs, what, ctx), TORCH_TO_LINALG, what,
                      min_parameter_bytes)
    path = Path(reference)
    if path.suffix.lower() in MODEL_SUFFIXES:
        if not path.is_file():
            raise AnsorError(f"{what}: no such file")
        return _lower(lambda ctx: import_onnx(path, what, ctx), ONNX_TO_LINALG, what, min_parameter_bytes)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AnsorError(f"{what}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AnsorError(f"{what}: cannot read: {exc}: give linalg MLIR, a .onnx model or file.py:factory") from None
    return mlir_source(text, what)


def mlir_source(text: str, name: str) -> ModelSource:
    """Linalg MLIR as given: its constants stay inline (the user wrote them)."""
    return ModelSource(text, name, entry_function(parse_module(text, name)))


def entry_function(module: ir.Module) -> str:
    """The name of the module's first public function: what a compiled program is called by."""
    for op in ops_of(module.body):
        if op.name in ("func.func", "util.func") and not _is_private(op):
            return ir.StringAttr(op.attributes["sym_name"]).value
    return ""


def _is_private(op: ir.Operation) -> bool:
    return "sym_visibility" in op.attributes and ir.StringAttr(op.attributes["sym_visibility"]).value == "private"


def _lower(importer, pipeline: Sequence[str], what: str, min_parameter_bytes: int) -> ModelSource:
    """Import into a fresh context, lower to linalg, and move the weights into an archive."""
    context = new_context()
    module = importer(context)
    with tempfile.TemporaryDirectory(prefix="ansor-weights-") as tmp:
        archive = Path(tmp) / "weights.irpa"
        _run_passes(module, [*pipeline, "iree-flow-outline-constants"], what)
        inline = _sub_byte_initial_values(module)
        _run_passes(module, [f"iree-io-export-parameters{{path={PARAMETER_SCOPE}={archive} "
                             f"minimum-size={min_parameter_bytes}}}"], what)
        _restore_initial_values(module, inline)
        parameters = archive.read_bytes() if archive.exists() else b""
    text = module.operation.get_asm(assume_verified=True)
    return ModelSource(text, what, entry_function(module), parameters)


def _sub_byte_initial_values(module: ir.Module) -> dict[str, ir.Attribute]:
    """The values of constant globals with sub-byte elements (i1 masks): `iree-compile --iree-parameter-import`
    leaves those as parameters, so a program built with embedded weights would still ask for an archive."""
    found = {}
    for op in ops_of(module.body):
        if op.name != "util.global" or "initial_value" not in op.attributes:
            continue
        kind = ir.TypeAttr(op.attributes["type"]).value
        if isinstance(kind, ir.ShapedType) and _bits(kind.element_type) % 8:
            found[ir.StringAttr(op.attributes["sym_name"]).value] = op.attributes["initial_value"]
    return found


def _bits(element: ir.Type) -> int:
    try:
        return ir.IntegerType(element).width
    except ValueError:
        return 8


def _restore_initial_values(module: ir.Module, values: dict[str, ir.Attribute]) -> None:
    for op in ops_of(module.body):
        if op.name == "util.global" and ir.StringAttr(op.attributes["sym_name"]).value in values:
            op.attributes["initial_value"] = values[ir.StringAttr(op.attributes["sym_name"]).value]


def _run_passes(module: ir.Module, passes: Sequence[str], what: str) -> None:
    with module.context:
        manager = passmanager.PassManager.parse("builtin.module(" + ",".join(passes) + ")")
        try:
            manager.run(module.operation)
        except ir.MLIRError as exc:
            raise AnsorError(lowering_error(module, exc, what)) from None
    leftover = next((op for op in walk(module.operation) if op.name.startswith(TORCH_DIALECT_PREFIXES)), None)
    if leftover is not None:
        raise AnsorError(f"{what}: op {leftover.name} at {describe_location(leftover.location)} was not lowered "
                         f"to linalg by IREE {iree_version.VERSION}: replace it in the model")


def lowering_error(module: ir.Module, exc: ir.MLIRError, what: str) -> str:
    """One line: the model op IREE cannot lower (an ONNX op left as `torch.operator`), else its first diagnostic."""
    for op in walk(module.operation):
        if op.name == UNSUPPORTED_OP and "name" in op.attributes:
            kind = ir.StringAttr(op.attributes["name"]).value
            return (f"{what}: {kind.replace('onnx.', 'ONNX op ', 1)} ({describe_location(op.location)}) is not "
                    f"supported by IREE {iree_version.VERSION}'s importer: replace it in the model or export it "
                    "with other ops")
    diagnostics = getattr(exc, "error_diagnostics", [])
    if not diagnostics:
        return f"{what}: IREE cannot lower it to linalg: {str(exc).splitlines()[0]}"
    first = diagnostics[0]
    return (f"{what}: IREE cannot lower it to linalg: {first.message.splitlines()[0]} "
            f"({describe_location(first.location)})")


def describe_location(location: ir.Location) -> str:
    """A location as a person reads it: an ONNX node's name, or a Python source line."""
    for cast, show in ((ir.NameLoc, lambda loc: f"node '{loc.name_str}'" if loc.name_str else "an unnamed node"),
                       (ir.FileLineColLoc, lambda loc: f"{loc.filename}:{loc.start_line}"),
                       (ir.CallSiteLoc, lambda loc: describe_location(loc.callee)),
                       (ir.FusedLoc, lambda loc: describe_location(loc.locations[0]) if loc.locations else "?")):
        try:
            return show(cast(location))
        except (ValueError, TypeError):
            continue
    return "unknown location"


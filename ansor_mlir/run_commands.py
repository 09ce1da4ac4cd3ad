"""How to build and run what the tools write: the exact `iree-compile` and `iree-run-module` commands, and how to
call the program from Python (a threaded build takes IREE's wait and signal fences after its inputs).

The tools print these after writing a program, so the commands a user copies are the ones that work for that
output: its device, its weights archive, its function and its inputs.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from iree.compiler import ir

from ansor_mlir.mlir.context import new_context

PARAMETER_SCOPE = "model"
# numpy's names of MLIR's element types, for the Python example's inputs.
NUMPY_TYPES = {"f16": "float16", "f32": "float32", "f64": "float64", "bf16": "float32", "i1": "bool"}


@dataclass(frozen=True)
class Runnable:
    """A compiled program and what running it takes."""

    vmfb: str
    function: str
    # The entry function's argument types (`tensor<4x32xf32>`).
    input_types: tuple[str, ...]
    device: str
    runtime_flags: tuple[str, ...] = ()
    # The weights archive the program reads at run time (None: none, or embedded).
    parameters: str | None = None
    # A threaded build (`--iree-execution-model=async-external`): the function takes a wait and a signal fence.
    fenced: bool = False


@dataclass(frozen=True)
class Entry:
    """A program's entry function: its name, its tensor arguments' types, and whether fences follow them."""

    name: str
    input_types: tuple[str, ...]
    fenced: bool


FUNCTION_OPS = ("func.func", "util.func")


def entry_of(text: str) -> Entry | None:
    """The first public function of a program (linalg or IREE's flow level); None when it has none."""
    with new_context():
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError:
            return None
        fence = ir.Type.parse("!hal.fence")
        for op in module.body.operations:
            op = op.operation
            visibility = op.attributes["sym_visibility"] if "sym_visibility" in op.attributes else None
            if op.name not in FUNCTION_OPS or (visibility is not None and ir.StringAttr(visibility).value != "public"):
                continue
            inputs = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value).inputs
            tensors = tuple(str(t) for t in inputs if isinstance(t, ir.RankedTensorType))
            return Entry(ir.StringAttr(op.attributes["sym_name"]).value, tensors, any(t == fence for t in inputs))
    return None


def command(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(word) for word in words)


def build_command(source: str, flags: Sequence[str], vmfb: str) -> str:
    return command(["iree-compile", source, *flags, "-o", vmfb])


def run_command(program: Runnable) -> str:
    """`iree-run-module` on zero-filled inputs of the function's types (it passes a threaded build's fences)."""
    words = ["iree-run-module", f"--module={program.vmfb}", f"--device={program.device}", *program.runtime_flags]
    if program.parameters:
        words.append(f"--parameters={PARAMETER_SCOPE}={program.parameters}")
    words.append(f"--function={program.function}")
    words += [f"--input={splat_input(t)}" for t in program.input_types]
    return command(words)


def python_example(program: Runnable) -> list[str]:
    """Five lines of Python that call the program on zero-filled inputs (`CompiledModel` passes the fences)."""
    weights = f", parameters=Path({program.parameters!r}).read_bytes()" if program.parameters else ""
    inputs = ", ".join(f"np.zeros({shape}, {dtype!r})" for shape, dtype in map(numpy_input, program.input_types))
    return [
        "from pathlib import Path",
        "import numpy as np",
        "from ansor_mlir import CompiledModel",
        f"program = CompiledModel(Path({program.vmfb!r}).read_bytes(), {program.function!r}, "
        f"device={program.device!r}{weights})",
        f"print(program({inputs}))",
    ]


def how_to_call(program: Runnable) -> list[str]:
    """What a caller needs to know of the function's ABI, and how to call it from Python."""
    if not program.fenced and not program.parameters:
        return [f"from Python: iree.runtime.load_vm_flatbuffer_file({program.vmfb!r}, "
                f"driver={program.device!r}).{program.function}(*inputs)"]
    lines = []
    if program.fenced:
        lines.append(f"{program.vmfb} is a threaded build (IREE's async-external execution model): "
                     f"{program.function} takes a wait and a signal fence after its inputs; iree-run-module passes "
                     "them itself, a direct iree.runtime call must pass them; from Python, CompiledModel does:")
    else:
        lines.append("from Python (CompiledModel hands the runtime the weights):")
    return lines + ["    " + line for line in python_example(program)]


def _tensor(type_text: str) -> ir.RankedTensorType:
    with new_context():
        return ir.RankedTensorType(ir.Type.parse(type_text))


def splat_input(type_text: str) -> str:
    """`iree-run-module`'s `--input` of a zero-filled value of a tensor type: `4x32xf32=0`."""
    tensor = _tensor(type_text)
    return "x".join([*map(str, tensor.shape), str(tensor.element_type)]) + "=0"


def numpy_input(type_text: str) -> tuple[tuple[int, ...], str]:
    """(shape, numpy dtype name) of a tensor type."""
    tensor = _tensor(type_text)
    element = str(tensor.element_type)
    dtype = NUMPY_TYPES.get(element) or (f"int{element[1:]}" if element.startswith("i") else "float32")
    return tuple(tensor.shape), dtype

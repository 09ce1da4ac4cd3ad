"""PyTorch modules into the torch dialect: `torch.export` and IREE's bundled FX importer.

`torch` is optional (`pip install torch==2.13.0`, the CPU build) and imported
only when a PyTorch model is given. A model reaches the CLI as `file.py:factory`,
where `factory()` returns `(module, example_inputs)`; the module is exported in
eval mode (inference: batch norm uses its running statistics) and left in the
mode it was given in.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from iree.compiler import ir

from ansor_mlir.errors import AnsorError

TORCH_TO_LINALG = (
    "torchdynamo-export-to-torch-backend-pipeline",
    "torch-backend-to-linalg-on-tensors-backend-pipeline",
)
INSTALL_HINT = "install the CPU build: pip install torch==2.13.0"
ENTRY = "main"
FACTORY_SEPARATOR = ":"


def torch_module(what: str) -> Any:
    """The `torch` package, or an error naming the input and how to install it."""
    try:
        import torch
    except ModuleNotFoundError:
        raise AnsorError(f"{what}: PyTorch models need the torch package: {INSTALL_HINT}") from None
    return torch


def is_torch_module(value: object) -> bool:
    """Whether `value` is a `torch.nn.Module`, without importing torch when nobody else has."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.nn.Module)


def is_factory_reference(text: str) -> bool:
    """`path/to/file.py:factory`: a Python file and the name of a function in it."""
    path, sep, attr = text.rpartition(FACTORY_SEPARATOR)
    return bool(sep) and path.endswith(".py") and attr.isidentifier()


def load_factory(reference: str) -> tuple[Any, tuple[Any, ...]]:
    """Run `file.py:factory` and check that it returned `(module, example_inputs)`."""
    path_text, _, attr = reference.rpartition(FACTORY_SEPARATOR)
    path = Path(path_text)
    if not path.is_file():
        raise AnsorError(f"{reference}: no such file {path}")
    torch_module(reference)
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(f"ansor_model_{path.stem}_{digest}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's file: any error in it is theirs, said in one line
        raise AnsorError(f"{reference}: running {path} failed: {type(exc).__name__}: {exc}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise AnsorError(f"{reference}: {path} defines no function {attr}: name a function returning "
                         "(module, example_inputs)")
    try:
        made = factory()
    except Exception as exc:
        raise AnsorError(f"{reference}: {attr}() failed: {type(exc).__name__}: {exc}") from None
    if not (isinstance(made, tuple) and len(made) == 2 and is_torch_module(made[0])):
        raise AnsorError(f"{reference}: {attr}() must return (torch.nn.Module, example_inputs), "
                         f"got {type(made).__name__}")
    return made[0], example_tuple(made[1], reference)


def example_tuple(inputs: Any, what: str) -> tuple[Any, ...]:
    """Example inputs as a tuple of tensors (one tensor or numpy array is one input)."""
    torch = torch_module(what)
    items = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    out = []
    for item in items:
        if isinstance(item, torch.Tensor):
            out.append(item)
        elif hasattr(item, "__array__"):
            out.append(torch.from_numpy(np.array(item, order="C")))  # a copy torch may own; scalars stay 0-d
        else:
            raise AnsorError(f"{what}: example input of type {type(item).__name__}: give tensors or numpy arrays")
    if not out:
        raise AnsorError(f"{what}: no example inputs: give the tensors the model is called with")
    return tuple(out)


def decompositions(torch: Any) -> dict:
    """The aten ops torch-mlir's linalg lowering wants decomposed first (IREE_NOTES: Importers)."""
    from torch._decomp import get_decompositions

    aten = torch.ops.aten
    return get_decompositions([
        aten._native_batch_norm_legit_no_training, aten._native_batch_norm_legit,
        aten._native_batch_norm_legit_functional, aten.native_layer_norm, aten.addmm, aten.t,
    ])


def export(module: Any, inputs: Sequence[Any], what: str) -> Any:
    """`torch.export` of the module in eval mode, decomposed for torch-mlir."""
    torch = torch_module(what)
    was_training = module.training
    module.train(False)
    try:
        with warnings.catch_warnings():  # torch's own deprecation notices, not the user's concern
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            program = torch.export.export(module, tuple(inputs))
            return program.run_decompositions(decompositions(torch))
    except Exception as exc:  # torch.export raises many kinds (Unsupported, UserError, ...): all mean "cannot trace"
        raise AnsorError(f"{what}: torch.export cannot trace the module: {type(exc).__name__}: "
                         f"{first_line(exc)}") from None
    finally:
        module.train(was_training)


def first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def import_torch(module: Any, inputs: Sequence[Any], what: str, context: ir.Context) -> ir.Module:
    """The module as a torch-dialect function `@main` (weights inline, as the FX importer makes them)."""
    program = export(module, example_tuple(inputs, what), what)
    from iree.compiler.extras.fx_importer import FxImporter

    importer = FxImporter(context=context)
    try:
        importer.import_frozen_program(program, func_name=ENTRY)
    except NotImplementedError as exc:
        raise AnsorError(f"{what}: IREE's FX importer does not support it: {first_line(exc)}") from None
    return importer.module

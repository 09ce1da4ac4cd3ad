"""ONNX models into the torch dialect, through IREE's bundled ONNX importer.

`onnx` is an optional dependency (`pip install ansor-mlir[importers]`); it is
imported only when an ONNX model is given. Shapes must be static: the tuner
measures concrete dispatches, so a model input with a symbolic dimension
(`batch`) is refused with the fix, before IREE sees it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iree.compiler import ir

from ansor_mlir.errors import AnsorError

ONNX_TO_LINALG = ("torch-onnx-to-torch-backend-pipeline", "torch-backend-to-linalg-on-tensors-backend-pipeline")
INSTALL_HINT = "install the importers extra: pip install 'ansor-mlir[importers]' (or pip install onnx)"


def onnx_module(what: str) -> Any:
    """The `onnx` package, or an error naming the input and how to get it."""
    try:
        import onnx
    except ModuleNotFoundError:
        raise AnsorError(f"{what}: reading ONNX models needs the onnx package: {INSTALL_HINT}") from None
    return onnx


def is_onnx_model(value: object) -> bool:
    """Whether `value` is an `onnx.ModelProto`, without importing onnx when it is not installed."""
    return type(value).__name__ == "ModelProto" and type(value).__module__.startswith("onnx")


def read_onnx(source: Path | Any, what: str) -> Any:
    """The model from a file or a `ModelProto`, checked and with every intermediate shape inferred."""
    onnx = onnx_module(what)
    if isinstance(source, Path):
        try:
            model = onnx.load(str(source))
        except FileNotFoundError:
            raise AnsorError(f"{what}: no such file") from None
        except Exception as exc:  # protobuf's DecodeError and friends: the file is not an ONNX model
            raise AnsorError(f"{what}: not an ONNX model ({type(exc).__name__}: {first_line(exc)}): "
                             "give a .onnx file saved by onnx.save or torch.onnx.export") from None
    else:
        model = source
    try:
        onnx.checker.check_model(model)
        return onnx.shape_inference.infer_shapes(model, data_prop=True, strict_mode=False)
    except Exception as exc:  # onnx raises ValidationError, InferenceError or ValueError (model over 2 GB)
        raise AnsorError(f"{what}: not a valid ONNX model: {first_line(exc)}") from None


def first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def check_static_inputs(model: Any, what: str) -> None:
    """Refuse graph inputs with symbolic or unknown dimensions (initializers are weights, not inputs)."""
    weights = {init.name for init in model.graph.initializer}
    for value in model.graph.input:
        if value.name in weights:
            continue
        if not value.type.HasField("tensor_type"):
            raise AnsorError(f"{what}: input '{value.name}' is not a tensor: only tensor inputs can be compiled")
        for index, dim in enumerate(value.type.tensor_type.shape.dim):
            if dim.WhichOneof("value") != "dim_value":  # a name (`batch`) or nothing; 0 is an empty dimension
                label = dim.dim_param or "?"
                raise AnsorError(
                    f"{what}: input '{value.name}' has a dynamic dimension {index} ('{label}'): only static shapes "
                    "can be tuned; export with fixed shapes (torch.onnx.export without dynamic_axes) or fix it "
                    "with onnx.tools.update_model_dims.update_inputs_outputs_dims"
                )


def import_onnx(source: Path | Any, what: str, context: ir.Context) -> ir.Module:
    """The model as a torch-dialect module (weights inline, as IREE's importer makes them)."""
    model = read_onnx(source, what)
    check_static_inputs(model, what)
    from iree.compiler.extras import onnx_importer

    try:
        info = onnx_importer.ModelInfo(model)
        module = info.create_module(context=context)
        importer = onnx_importer.NodeImporter.define_function(info.main_graph, module.operation)
        importer.import_all()
    except onnx_importer.OnnxImportError as exc:
        raise AnsorError(f"{what}: IREE's ONNX importer cannot read it: {first_line(exc)}") from None
    return module


"""Small ONNX models built with `onnx.helper` (no PyTorch needed) and their onnxruntime outputs."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# Opset 17 came with IR version 8: stated, so that an onnxruntime older than the installed onnx (whose newest IR
# version `make_model` writes by default) still loads the models.
OPSET, IR_VERSION = 17, 8


def opset17_model(graph: onnx.GraphProto) -> onnx.ModelProto:
    """A model of `graph` at opset 17 and IR version 8."""
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)


def _weight(rng: np.random.Generator, name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)


def mlp_onnx(batch: int = 4, features: int = 32, hidden: int = 64, classes: int = 8, seed: int = 0) -> onnx.ModelProto:
    """`relu(x @ W1 + b1) @ W2^T + b2` (MatMul, Add, Relu, Gemm with transB), weights as initializers."""
    rng = np.random.default_rng(seed)
    weights = [_weight(rng, "w1", features, hidden), _weight(rng, "b1", hidden),
               _weight(rng, "w2", classes, hidden), _weight(rng, "b2", classes)]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
        helper.make_node("Relu", ["hb"], ["a"], name="relu1"),
        helper.make_node("Gemm", ["a", "w2", "b2"], ["y"], name="fc2", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, features])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, classes])], initializer=weights,
    )
    return opset17_model(graph)


def cnn_onnx(channels: int = 8, size: int = 12, seed: int = 0) -> onnx.ModelProto:
    """Conv 3x3 (NCHW, padded) + Relu + GlobalAveragePool + Flatten."""
    rng = np.random.default_rng(seed)
    weights = [_weight(rng, "w", channels, 3, 3, 3), _weight(rng, "b", channels)]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["y"], name="flatten"),
    ]
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels])], initializer=weights,
    )
    return opset17_model(graph)


def single_node_onnx(op: str, inputs: dict[str, list], output: list, **attributes) -> onnx.ModelProto:
    """One node (named after its op) on float inputs; symbolic dims are strings."""
    node = helper.make_node(op, list(inputs), ["y"], name=op.lower(), **attributes)
    graph = helper.make_graph(
        [node], op.lower(), [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, output)],
    )
    return opset17_model(graph)


def onnxruntime_outputs(model: onnx.ModelProto, *inputs: np.ndarray) -> list[np.ndarray]:
    import onnxruntime

    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: x for i, x in zip(session.get_inputs(), inputs, strict=True)})

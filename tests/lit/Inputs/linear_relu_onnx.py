"""Write a small ONNX model for the lit tests: relu(x @ W^T + b), x 4x8, W 16x8 (Gemm with transB)."""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
weights = [numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w"),
           numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")]
nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h"], name="fc", transB=1),
         helper.make_node("Relu", ["h"], ["y"], name="relu")]
graph = helper.make_graph(nodes, "linear_relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])], initializer=weights)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])

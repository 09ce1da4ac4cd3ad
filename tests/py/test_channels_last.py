"""Channels-last rewrite: an NCHW model's convolutions and poolings become NHWC ones, exactly, and its tasks follow."""

from __future__ import annotations

import numpy as np
import onnx
from conftest import AVX2_CPU, pinned_target
from onnx import TensorProto, helper, numpy_helper
from onnx_models import onnxruntime_outputs, opset17_model

import ansor_mlir
from ansor_mlir import api
from ansor_mlir.frontend.channels_last import NAME
from ansor_mlir.frontend.program_rewrites import rewrite_program


def inverted_residual(channels: int = 8, expand: int = 4, size: int = 10, seed: int = 0) -> onnx.ModelProto:
    """MobileNetV2's block, NCHW: 1x1 expansion, 3x3 depthwise (padded), 1x1 projection, max pool, 3x3 conv, plus
    ResNet's strided 1x1 shortcut."""
    rng = np.random.default_rng(seed)
    wide = channels * expand

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    weights = [weight("we", wide, channels, 1, 1), weight("be", wide), weight("wd", wide, 1, 3, 3), weight("bd", wide),
               weight("wp", channels, wide, 1, 1), weight("wc", channels, channels, 3, 3),
               weight("ws", channels, channels, 1, 1)]
    nodes = [
        helper.make_node("Conv", ["x", "we", "be"], ["e"], name="expand"),
        helper.make_node("Relu", ["e"], ["er"]),
        helper.make_node("Conv", ["er", "wd", "bd"], ["d"], name="depthwise", group=wide, pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["d"], ["dr"]),
        helper.make_node("Conv", ["dr", "wp"], ["p"], name="project"),
        helper.make_node("Add", ["p", "x"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["m"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["m", "wc"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["r", "ws"], ["s"], name="shortcut", strides=[2, 2]),
        helper.make_node("Add", ["c", "s"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, size // 2, size // 2])],
        initializer=weights)
    return opset17_model(graph)


def test_rewrite_makes_every_convolution_and_pooling_channels_last():
    source = ansor_mlir.load_model(inverted_residual())
    changed = rewrite_program(source.text, (NAME,), "block")
    assert changed.applied == ((NAME, 6),)  # 4 convolutions, 1 depthwise, 1 max pool
    assert "nchw" not in changed.text
    assert "linalg.depthwise_conv_2d_nhwc_hwc" in changed.text and "linalg.pooling_nhwc_max" in changed.text
    assert rewrite_program(changed.text, (NAME,), "block").text == changed.text  # nothing left to rewrite


def test_program_without_channels_first_ops_keeps_its_text():
    text = ansor_mlir.load_model(inverted_residual()).text
    nhwc = rewrite_program(text, (NAME,), "block").text
    assert rewrite_program(nhwc, (NAME,), "block") == rewrite_program(nhwc, (), "block")


def test_rewritten_model_matches_onnxruntime_and_tasks_are_channels_last():
    """Built by IREE from the rewritten program: onnxruntime's outputs; every dispatch is a task, channels last."""
    model = inverted_residual()
    x = np.random.default_rng(1).standard_normal((1, 8, 10, 10)).astype(np.float32)
    (expected,) = onnxruntime_outputs(model, x)
    tuned_layout = ansor_mlir.compile(model)
    as_imported = ansor_mlir.compile(model, rewrites="none")
    np.testing.assert_allclose(tuned_layout(x), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(as_imported(x), expected, rtol=1e-4, atol=1e-4)
    tasks = api.extract_tasks(model, pinned_target(AVX2_CPU))
    depthwise = [t for t in tasks if len(t.root.loop_extents) == 5 and t.root.loop_extents[2] == 32]
    assert depthwise, [t.root.loop_extents for t in tasks]
    # The expansion writes into the depthwise op's padded input: still a task, returning the whole padded buffer.
    expansion = [t for t in tasks if t.root.loop_extents == (10, 10, 32, 8)]
    assert expansion and expansion[0].output_types == ("tensor<12x12x32xf32>",)
    # The strided shortcut is a contraction over the strided input, no window left (where its output channels go
    # is IREE's transpose propagation's choice: here the program's output is NCHW).
    assert any(sorted(t.root.loop_extents) == [5, 5, 8, 8] for t in tasks), [t.root.loop_extents for t in tasks]

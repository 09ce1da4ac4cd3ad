"""The whole-model profile: IREE's per-dispatch profile read against the flow IR, onnxruntime's beside it.

The readers are checked on small made-up profiles whose sums are known; the
whole path on the tiny CNN, built, profiled by IREE's runtime and by
onnxruntime for real, with tiny repeats.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ansor_bench.model_profile import (
    Dispatch,
    Inventory,
    ModelProfile,
    model_markdown,
    op_rows,
    profile_model,
    read_iree_profile,
    read_ort_profile,
)
from ansor_bench.op_shapes import CONTRACTION, OpShape
from ansor_mlir.errors import AnsorError

ROOT = Path(__file__).parents[2]
CONV = OpShape("conv 3x3", CONTRACTION, 4096, 27)


def function_row(name: str, runs: int, total_ns: int) -> dict:
    return {"row_type": "host_execution_function", "function_name": name, "sample_count": runs,
            "total_duration_ns": total_ns}


def queue_row(event: str, total_ns: int) -> dict:
    return {"row_type": "host_execution_queue_operation", "event_name": event, "total_duration_ns": total_ns}


INVENTORY = Inventory((Dispatch("main_dispatch_0_conv", 3, CONV, 1000, 64),
                       Dispatch("main_dispatch_1_copy", 1, CONV, 0, 64)))
ROWS = [function_row("main_dispatch_0_conv", 6, 6000), function_row("main_dispatch_1_copy", 2, 1000),
        queue_row("alloca", 300), queue_row("dealloca", 100), queue_row("execute", 8000),
        queue_row("dispatch", 7000)]


def test_each_dispatch_counts_all_its_runs_in_a_call():
    """Two profiled calls: a dispatch run 3 times a call for 6000 ns in all costs 3 us a call, not 1 or 6."""
    profile = read_iree_profile("p", ROWS, call_s=10e-6, iterations=2, inventory=INVENTORY)
    seconds = {t.dispatch.function: t.seconds for t in profile.dispatches}
    assert seconds == pytest.approx({"main_dispatch_0_conv": 3e-6, "main_dispatch_1_copy": 0.5e-6})
    assert profile.kernels_s == pytest.approx(3.5e-6) == pytest.approx(profile.queue_dispatch_s)
    assert profile.allocation_s == pytest.approx(0.2e-6)
    assert profile.command_buffer_s == pytest.approx(0.5e-6)  # 4 us of command buffers, 3.5 of them dispatches
    assert profile.host_s == pytest.approx(5.8e-6)
    assert profile.outside_s == pytest.approx(profile.command_buffer_s + profile.allocation_s + profile.host_s)


def test_a_profile_of_another_build_is_refused():
    with pytest.raises(AnsorError, match="ran 6 times in 3 profiled calls"):
        read_iree_profile("p", ROWS, call_s=10e-6, iterations=3, inventory=INVENTORY)
    with pytest.raises(AnsorError, match="flow IR does not dispatch"):
        read_iree_profile("p", [*ROWS, function_row("main_dispatch_9_other", 2, 10)], 10e-6, 2, INVENTORY)


def test_onnxruntime_profile_drops_the_warm_up_run():
    def run(ts: int, dur: int) -> dict:
        return {"cat": "Session", "name": "model_run", "ts": ts, "dur": dur}

    def node(ts: int, dur: int) -> dict:
        args = {"op_name": "Conv", "input_type_shape": [{"float": [1, 3, 16, 16]}, {"float": [16, 3, 3, 3]}],
                "output_type_shape": [{"float": [1, 16, 16, 16]}]}
        return {"cat": "Node", "name": "conv_kernel_time", "ts": ts, "dur": dur, "args": args}

    events = [run(0, 900), node(10, 800), run(1000, 100), node(1010, 60), run(2000, 120), node(2010, 80)]
    profile = read_ort_profile(events, {}, runs=2)
    (conv,) = profile.nodes
    assert conv.seconds == pytest.approx(70e-6) and profile.run_s == pytest.approx(110e-6)
    assert conv.shape == OpShape("conv 3x3", CONTRACTION, 16 * 16 * 16, 27)
    assert profile.outside_s == pytest.approx(40e-6)


@pytest.fixture(scope="module")
def tiny_profile(tmp_path_factory, target) -> ModelProfile:
    from ansor_mlir import api
    from ansor_mlir.frontend.torch_import import load_factory

    sys.path.insert(0, str(ROOT / "tools"))
    from export_onnx import export_onnx

    work = tmp_path_factory.mktemp("profile")
    reference = f"{ROOT / 'examples' / 'models' / 'tiny.py'}:tiny_cnn"
    onnx_path = export_onnx(reference, work / "tiny_cnn.onnx")
    _, inputs = load_factory(reference)
    return profile_model("tiny_cnn", api.load_model(onnx_path), onnx_path, [x.numpy() for x in inputs], target,
                         None, work, iterations=2, rounds=1, ort_runs=2, min_round_s=0.02)


def test_the_tiny_cnn_profile_adds_up(tiny_profile):
    """Each build's dispatch times add up to IREE's own total of its queue's dispatches, lie within its
    command-buffer executions, and those within the call; onnxruntime's nodes within its runs."""
    assert [p.label for p in tiny_profile.iree] == ["iree_default", "rewritten"]
    assert set(tiny_profile.median_ms) == {"iree_default", "rewritten", "onnxruntime"}
    assert not tiny_profile.mismatches
    for build in tiny_profile.iree:
        assert build.kernels_s == pytest.approx(build.queue_dispatch_s, rel=1e-6)
        assert 0 < build.kernels_s <= build.execute_s <= build.call_s
        assert sum(t.dispatch.calls for t in build.dispatches) == 5  # pad or transpose, 2 convs, mean, linear
        # The zero buffers the two padded convolutions' inputs are written into, filled whole on every call.
        assert (build.fills, build.fill_bytes) == (2, 4 * (3 * 18 * 18 + 16 * 18 * 18))
    ort = tiny_profile.onnxruntime
    assert 0 < ort.kernels_s <= ort.run_s
    assert 0 < tiny_profile.peak_flops < 1e13


def test_the_tiny_cnn_convolutions_match_onnxruntimes(tiny_profile):
    """Both convolutions (3x3 over 3 channels, 3x3 stride 2 over 16) are one dispatch and one node each."""
    rewritten = tiny_profile.iree[1]
    convs = {row.kind: row for row in op_rows(rewritten, tiny_profile.onnxruntime) if row.kind.startswith("conv")}
    assert set(convs) == {"conv 3x3", "conv 3x3 /2"}
    for row in convs.values():
        assert (row.ours_runs, row.theirs_runs) == (1, 1) and row.ours_s > 0 and row.theirs_s > 0
    assert convs["conv 3x3"].shape.key == (CONTRACTION, 16 * 16 * 16, 3 * 3 * 3)
    assert convs["conv 3x3 /2"].shape.key == (CONTRACTION, 32 * 8 * 8, 16 * 3 * 3)


def test_the_profile_survives_its_json_and_renders(tiny_profile):
    again = ModelProfile.from_json(json.loads(json.dumps(tiny_profile.to_json())))
    assert again == tiny_profile
    text = model_markdown(again)
    assert "| outside kernels |" in text and "`main_graph_dispatch_" in text
    assert all(f"Top dispatches of {label}" in text for label in ("iree_default", "rewritten"))

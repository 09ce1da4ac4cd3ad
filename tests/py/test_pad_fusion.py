"""Pad fusion: window ops that reduce over their window only read their padding in their own dispatch."""

from __future__ import annotations

import numpy as np

from ansor_bench.workloads import make_workload
from ansor_mlir import api
from ansor_mlir.frontend.dispatch_regions import as_one_dispatch
from ansor_mlir.frontend.pad_fusion import NAME
from ansor_mlir.frontend.program_rewrites import DEFAULT_REWRITES, SEPARATOR, rewrite_program
from ansor_mlir.measure.compare import load_function
from ansor_mlir.mlir.iree_compiler import FLOW_PAD_FLAG, compile_vmfb, run_tool
from ansor_mlir.tuning.callbacks import TuningCallback

WITH_PAD_FUSION = SEPARATOR.join((DEFAULT_REWRITES, NAME))


class Notes(TuningCallback):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_note(self, message: str) -> None:
        self.seen.append(message)

MAX_POOL = """
func.func @pool(%x: tensor<1x9x9x16xf32>) -> tensor<1x9x9x16xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %p = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %ninf : f32
  } : tensor<1x9x9x16xf32> to tensor<1x11x11x16xf32>
  %w = tensor.empty() : tensor<3x3xf32>
  %e = tensor.empty() : tensor<1x9x9x16xf32>
  %f = linalg.fill ins(%ninf : f32) outs(%e : tensor<1x9x9x16xf32>) -> tensor<1x9x9x16xf32>
  %y = linalg.pooling_nhwc_max {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
    ins(%p, %w : tensor<1x11x11x16xf32>, tensor<3x3xf32>) outs(%f : tensor<1x9x9x16xf32>) -> tensor<1x9x9x16xf32>
  return %y : tensor<1x9x9x16xf32>
}
"""


def fused(text: str) -> str:
    return rewrite_program(text, WITH_PAD_FUSION.split(SEPARATOR), "test").text


def test_window_only_reductions_get_their_pad_and_others_keep_theirs():
    depthwise = fused(make_workload("DEP", [1, 12, 12, 32, 3, 1, 1]).mlir)
    assert depthwise.count("flow.dispatch.region") == 1 and "tensor.pad" in depthwise.split("flow.dispatch.region")[1]
    assert fused(MAX_POOL).count("flow.dispatch.region") == 1
    # A convolution reduces over its input channels too: IREE's fused form of it is slower, so it stays.
    conv = make_workload("C2D", [1, 12, 12, 16, 32, 3, 1, 1]).mlir
    assert "flow.dispatch.region" not in fused(conv)
    assert rewrite_program(conv, WITH_PAD_FUSION.split(SEPARATOR), "test").text == conv


def test_a_task_holding_a_pad_is_built_as_one_dispatch():
    task = """func.func @task(%x: tensor<1x4x4x8xf32>, %w: tensor<3x3x8xf32>) -> tensor<1x4x4x8xf32> {
  %z = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %z : f32
  } : tensor<1x4x4x8xf32> to tensor<1x6x6x8xf32>
  %e = tensor.empty() : tensor<1x4x4x8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %y = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
    ins(%p, %w : tensor<1x6x6x8xf32>, tensor<3x3x8xf32>) outs(%f : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %y : tensor<1x4x4x8xf32>
}"""
    wrapped = as_one_dispatch(task, "task")
    assert wrapped.count("flow.dispatch.region") == 1 and wrapped.index("flow.dispatch.region") < wrapped.index("pad")
    flags = api.resolve_target("llvm-cpu").compile_flags()
    flow = run_tool("iree-compile", [*flags, "--compile-to=flow", "-"], stdin=wrapped.encode())
    assert flow.ok and flow.stdout.decode().count("flow.executable private") == 1
    # Without a pad IREE forms one dispatch anyway: the text, and so the task's key, stays as it was.
    gemm = make_workload("GMM", [1, 8, 8, 8]).mlir
    assert as_one_dispatch(gemm, "gemm") == gemm


def test_a_tuned_depthwise_program_with_fused_pads_builds_runs_and_matches_numpy(tmp_path):
    workload = make_workload("DEP", [1, 14, 14, 32, 3, 1, 1])
    target = api.resolve_target("llvm-cpu")
    notes = Notes()
    result = api.tune(workload.mlir, target, trials_per_task=2, log=tmp_path / "log.jsonl", progress=False,
                      rewrites=WITH_PAD_FUSION, callbacks=[notes])
    assert any("pad-fusion (1 op)" in n and FLOW_PAD_FLAG in n for n in notes.seen), notes.seen
    assert [r.task.ops for r in result.tasks] == [("linalg.depthwise_conv_2d_nhwc_hwc",)]  # no pad dispatch
    assert "tensor.pad" in result.module and "flow.executable" in result.module
    # A flow-level module with a fused pad builds only with native pad handling; compile_vmfb adds it.
    plain = run_tool("iree-compile", [*target.compile_flags(), "-", "-o", str(tmp_path / "plain.vmfb")],
                     stdin=result.module.encode())
    assert not plain.ok and FLOW_PAD_FLAG not in target.compile_flags()
    built = compile_vmfb(result.module, target.compile_flags(), tmp_path / "tuned.vmfb")
    assert built.ok, built.stderr[-2000:]
    fn, _ = load_function(tmp_path / "tuned.vmfb", workload.func_name)
    inputs = workload.inputs(0)
    (expected,) = workload.reference(inputs)
    np.testing.assert_allclose(np.asarray(fn(*inputs).to_host()), expected, rtol=1e-4, atol=1e-4)

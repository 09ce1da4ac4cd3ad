"""Border split: a padded convolution without the multiplications by its padding, exact, and only where the
padding is a sizable share of the taps."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import AVX2_CPU, pinned_target

from ansor_bench.workloads import make_workload
from ansor_mlir import api
from ansor_mlir.frontend.border_split import MIN_PADDED_SHARE, MIN_SKIPPED_MACS, NAME, Window, split_padded_borders
from ansor_mlir.frontend.program_rewrites import parse_rewrites, rewrite_program
from ansor_mlir.measure.compare import run_once
from ansor_mlir.mlir.context import new_context, parse_module
from ansor_mlir.mlir.iree_compiler import compile_vmfb


def split(text: str, min_skipped_macs: int = 0) -> str:
    """`text` after the border split, at any size (the suite's shapes are too large to run in a test)."""
    module = parse_module(text, "test", new_context(allow_unregistered=True))
    if not split_padded_borders(module, min_skipped_macs):
        return text
    module.operation.verify()
    return module.operation.get_asm(assume_verified=True)


@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("dilation", [1, 2])
@pytest.mark.parametrize("taps", [1, 3, 7])
def test_runs_cover_every_output_with_exactly_its_real_taps(stride, dilation, taps):
    for size in (1, 4, 16):
        for low in range(0, dilation * (taps - 1) + 1):
            for high in range(0, dilation * (taps - 1) + 1):
                outputs = (size + low + high - dilation * (taps - 1) - 1) // stride + 1
                if outputs < 1:
                    continue
                window = Window(0, 0, 0, stride, dilation, size, low, taps, outputs)
                covered = []
                for first_out, stop_out, first_tap, stop_tap in window.runs():
                    for o in range(first_out, stop_out):
                        covered.append(o)
                        real = [k for k in range(taps) if 0 <= stride * o - low + dilation * k < size]
                        assert list(range(first_tap, stop_tap)) == real, (window, o)
                assert covered == list(range(outputs))
                padded = sum(1 for o in range(outputs) for k in range(taps)
                             if not 0 <= stride * o - low + dilation * k < size)
                assert window.padded_share() == pytest.approx(padded / (outputs * taps))


@pytest.mark.parametrize("name, shape", [
    ("C3D", [1, 6, 8, 8, 2, 4, 3, 2, 1]),  # a short padded depth: split along it
    ("DIL", [1, 6, 6, 2, 4, 3, 1, 2, 2]),  # dilated: a border output reads a tap or two of padding
    ("C1D", [1, 5, 3, 4, 5, 1, 2]),  # 1-D, stride 1: two border outputs on each side
])
def test_split_convolutions_compute_what_the_original_computes(tmp_path, name, shape):
    workload = make_workload(name, shape)
    text = split(workload.mlir)
    assert text != workload.mlir and text.count("linalg.conv") >= 2 and "tensor.insert_slice" in text
    inputs = workload.inputs()
    (expected,) = workload.reference(inputs)
    built = compile_vmfb(text, pinned_target(AVX2_CPU).compile_flags(), tmp_path / "split.vmfb")
    assert built.ok, built.stderr[-2000:]
    (got,) = run_once(tmp_path / "split.vmfb", workload.func_name, inputs)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


BIASED = """
func.func @conv(%x: tensor<1x4x3xf32>, %w: tensor<3x3x2xf32>, %b: tensor<1x4x2xf32>) -> tensor<1x4x2xf32> {
  %z = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 1, 0] high[0, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index):
    tensor.yield %z : f32
  } : tensor<1x4x3xf32> to tensor<1x6x3xf32>
  %y = linalg.conv_1d_nwc_wcf {dilations = dense<1> : tensor<1xi64>, strides = dense<1> : tensor<1xi64>}
    ins(%p, %w : tensor<1x6x3xf32>, tensor<3x3x2xf32>) outs(%b : tensor<1x4x2xf32>) -> tensor<1x4x2xf32>
  return %y : tensor<1x4x2xf32>
}
"""


def test_an_accumulator_with_values_is_sliced_for_each_run(tmp_path):
    """The initial values (a bias accumulated into) reach every output once, added to the runs' result."""
    text = split(BIASED)
    assert text.count("linalg.conv_1d_nwc_wcf") == 3 and "arith.addf" in text
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((1, 4, 3), (3, 3, 2), (1, 4, 2)))
    padded = np.pad(x, ((0, 0), (1, 1), (0, 0)))
    expected = b + np.stack([np.einsum("kc,kcf->f", padded[0, o:o + 3], w) for o in range(4)])[None]
    built = compile_vmfb(text, pinned_target(AVX2_CPU).compile_flags(), tmp_path / "biased.vmfb")
    assert built.ok, built.stderr[-2000:]
    (got,) = run_once(tmp_path / "biased.vmfb", "conv", [x, w, b])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_convolutions_with_little_padding_keep_their_text():
    # C2D at 224x224, 7x7, stride 2, pad 3: under 1% of the taps in either window dimension read padding.
    wide = make_workload("C2D", [1, 224, 224, 3, 64, 7, 2, 3]).mlir
    assert split(wide) == wide
    unpadded = make_workload("C2D", [1, 12, 12, 16, 32, 3, 1, 0]).mlir
    assert split(unpadded) == unpadded
    # A small convolution whose padding is a large share, but skipping it saves too little to pay for the runs.
    small = make_workload("C3D", [1, 6, 8, 8, 2, 4, 3, 2, 1]).mlir
    assert split(small, MIN_SKIPPED_MACS) == small and split(small) != small
    assert rewrite_program(small, parse_rewrites(f"channels-last+{NAME}"), "test").text == small
    # T2D's phases (4x4 outputs, 2 taps, padded by 1) read padding at 12.5% of their taps, for 2 million MACs.
    t2d = make_workload("T2D", [1, 4, 4, 512, 256, 4, 2, 1]).mlir
    phased = rewrite_program(t2d, ("phase-decomposition",), "test").text
    assert rewrite_program(t2d, ("phase-decomposition", NAME), "test").text == phased
    assert MIN_PADDED_SHARE < 0.11


def test_c3d_splits_along_its_depth_and_every_run_is_a_task():
    """The suite's C3D: 11% of its taps read the depth's padding; three border runs and the interior, each a
    task of its own (the rewritten program's tasks)."""
    text = make_workload("C3D", [1, 16, 224, 224, 3, 64, 7, 2, 3]).mlir
    rewritten = rewrite_program(text, (NAME,), "test").text
    assert rewritten.count("linalg.conv_3d_ndhwc_dhwcf") == 4
    tasks = api.extract_tasks(text, pinned_target(AVX2_CPU), rewrites=NAME)
    convolutions = [t for t in tasks if t.tunable]
    assert len(convolutions) == 4

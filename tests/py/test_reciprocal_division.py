"""Reciprocal division: dividing by a broadcast value becomes one reciprocal per value and a multiplication."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import AVX2_CPU, pinned_target

from ansor_bench.workloads import make_workload
from ansor_mlir.frontend.program_rewrites import rewrite_program
from ansor_mlir.frontend.reciprocal_division import NAME
from ansor_mlir.measure.compare import run_once
from ansor_mlir.mlir.iree_compiler import compile_vmfb

# `x / d` element by element where `d` is read as `d[r]` (broadcast along c), or `d[r, c]` (not broadcast).
DIVIDE = """
func.func @f(%x: tensor<8x32xf32>, %d: tensor<{divisor}xf32>) -> tensor<8x32xf32> {{
  %e = tensor.empty() : tensor<8x32xf32>
  %y = linalg.generic {{indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> ({read})>,
      affine_map<(r, c) -> (r, c)>], iterator_types = ["parallel", "parallel"]}}
      ins(%x, %d : tensor<8x32xf32>, tensor<{divisor}xf32>) outs(%e : tensor<8x32xf32>) {{
    ^bb0(%in: f32, %den: f32, %out: f32):
      %q = arith.divf %in, %den : f32
      {extra}
      linalg.yield %r : f32
    }} -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}}
"""


def rewritten(text: str) -> str:
    return rewrite_program(text, [NAME], "test").text


def test_softmax_divides_once_per_row_and_still_matches_numpy(tmp_path):
    workload = make_workload("softmax", [16, 64])
    text = rewritten(rewrite_program(workload.mlir, ["shared-subexpressions"], "softmax").text)
    # One division per row sum (16 of them) where there were 16x64; the rows are multiplied by it.
    assert text.count("arith.divf") == 1 and "tensor<16xf32>) outs" in text and text.count("arith.mulf") == 1
    inputs = workload.inputs()
    built = compile_vmfb(text, pinned_target(AVX2_CPU).compile_flags(), tmp_path / "reciprocal.vmfb")
    assert built.ok, built.stderr
    (got,) = run_once(tmp_path / "reciprocal.vmfb", workload.func_name, inputs)
    np.testing.assert_allclose(got, workload.reference(inputs)[0], rtol=1e-6, atol=1e-7)


def test_a_broadcast_divisor_read_only_to_divide_is_rewritten():
    text = DIVIDE.format(divisor="8", read="r", extra="%r = arith.addf %q, %in : f32")
    assert "arith.mulf %in, " in rewritten(text)


@pytest.mark.parametrize("divisor,read,extra", [
    ("8x32", "r, c", "%r = arith.addf %q, %in : f32"),  # every divisor element used once: nothing to save
    ("8", "r", "%r = arith.addf %q, %den : f32"),  # the divisor is also added: its value is still needed
], ids=["not-broadcast", "divisor-used-otherwise"])
def test_other_divisions_keep_their_text(divisor, read, extra):
    source = DIVIDE.format(divisor=divisor, read=read, extra=extra)
    assert rewritten(source) == source

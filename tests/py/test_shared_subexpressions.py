"""Shared subexpressions: an expensive value several generics compute from the same inputs is computed once."""

from __future__ import annotations

import numpy as np
from conftest import AVX2_CPU, pinned_target

from ansor_bench.workloads import make_workload
from ansor_mlir import api
from ansor_mlir.frontend.program_rewrites import rewrite_program
from ansor_mlir.frontend.shared_subexpressions import NAME
from ansor_mlir.measure.compare import run_once
from ansor_mlir.mlir.context import parse_module
from ansor_mlir.mlir.iree_compiler import compile_vmfb

# Two generics computing exp(x) from the same input: a sum (a reduction) and a scaling (all-parallel).
TWO_USES = """
func.func @f(%x: tensor<8x32xf32>, %s: tensor<8xf32>) -> (tensor<8xf32>, tensor<8x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e0 : tensor<8xf32>) -> tensor<8xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
      iterator_types = ["parallel", "reduction"]} ins(%x : tensor<8x32xf32>) outs(%z : tensor<8xf32>) {
    ^bb0(%in: f32, %acc: f32):
      %e = math.exp %in : f32
      %r = arith.addf %acc, %e : f32
      linalg.yield %r : f32
    } -> tensor<8xf32>
  %e1 = tensor.empty() : tensor<8x32xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,
      affine_map<(r, c) -> (r, c)>], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : tensor<8x32xf32>, tensor<8xf32>) outs(%e1 : tensor<8x32xf32>) {
    ^bb0(%in: f32, %scale: f32, %out: f32):
      %e = math.exp %in : f32
      %r = arith.mulf %e, %scale : f32
      linalg.yield %r : f32
    } -> tensor<8x32xf32>
  return %sum, %y : tensor<8xf32>, tensor<8x32xf32>
}
"""


def shared(text: str) -> str:
    return rewrite_program(text, [NAME], "test").text


def test_softmax_computes_each_exp_once_and_still_matches_numpy(tmp_path):
    workload = make_workload("softmax", [16, 64])
    assert workload.mlir.count("math.exp") == 2
    text = shared(workload.mlir)
    assert text.count("math.exp") == 1
    # Same results, built by the real IREE compiler (flow: still two dispatches, one exp between them).
    inputs = workload.inputs()
    built = compile_vmfb(text, pinned_target(AVX2_CPU).compile_flags(), tmp_path / "shared.vmfb")
    assert built.ok, built.stderr
    (got,) = run_once(tmp_path / "shared.vmfb", workload.func_name, inputs)
    np.testing.assert_allclose(got, workload.reference(inputs)[0], rtol=1e-5, atol=1e-6)
    tasks = api.extract_tasks(workload.mlir, pinned_target(AVX2_CPU), rewrites=NAME)
    assert len(tasks) == 2
    # The sum writes the exps beside itself and IREE keeps them in its dispatch with the division: no dispatch
    # writes exps out for another to read back (the first returns the row maxima only).
    first, second = tasks
    assert first.output_types == ("tensor<16xf32>",)
    assert "math.exp" in second.func_text and "math.exp" not in first.func_text
    # That root has two outputs and no partial-reduction form: no rfactor sketch is offered for it.
    rules = {rule for sketch in api.generate_sketches(second, pinned_target(AVX2_CPU)) for rule in sketch.rules}
    assert "rfactor" not in rules and "td-multi-level-tiling" in rules


def test_a_reduction_and_an_elementwise_op_share_their_exp(tmp_path):
    text = shared(TWO_USES)
    assert text.count("math.exp") == 1
    x = np.random.default_rng(0).standard_normal((8, 32)).astype(np.float32)
    s = np.linspace(0.5, 2.0, 8, dtype=np.float32)
    built = compile_vmfb(text, pinned_target(AVX2_CPU).compile_flags(), tmp_path / "two.vmfb")
    assert built.ok, built.stderr
    total, scaled = run_once(tmp_path / "two.vmfb", "f", [x, s])
    np.testing.assert_allclose(total, np.exp(x).sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(scaled, np.exp(x) * s[:, None], rtol=1e-5)


def test_programs_with_nothing_worth_sharing_keep_their_text():
    # Only cheap ops shared (a subtraction): no tensor is worth it.
    cheap = TWO_USES.replace("math.exp %in", "arith.negf %in")
    assert shared(cheap) == cheap
    # The same exp read through different maps (a transposed read) is a different value.
    transposed = TWO_USES.replace(
        "affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,\n      affine_map<(r, c) -> (r, c)>]",
        "affine_map<(r, c) -> (c, r)>, affine_map<(r, c) -> (r)>,\n      affine_map<(r, c) -> (r, c)>]",
    ).replace("ins(%x, %s : tensor<8x32xf32>", "ins(%xt, %s : tensor<32x8xf32>").replace(
        "%s: tensor<8xf32>)", "%s: tensor<8xf32>, %xt: tensor<32x8xf32>)")
    assert "(c, r)" in transposed
    parse_module(transposed, "transposed").operation.verify()
    assert shared(transposed) == transposed
    # Two reductions sharing an exp: no generic writes a tensor the size of the loops, so none is made.
    two_sums = TWO_USES.replace(SCALED, SCALED_SUM).replace("%sum, %y : tensor<8xf32>, tensor<8x32xf32>",
                                                            "%sum, %y : tensor<8xf32>, tensor<8xf32>")
    two_sums = two_sums.replace("-> (tensor<8xf32>, tensor<8x32xf32>)", "-> (tensor<8xf32>, tensor<8xf32>)")
    parse_module(two_sums, "two sums").operation.verify()
    assert two_sums.count("reduction") == 2
    assert shared(two_sums) == two_sums


SCALED = TWO_USES[TWO_USES.index("  %e1 ="):TWO_USES.index("  return")]
SCALED_SUM = """  %y = linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,
      affine_map<(r, c) -> (r)>], iterator_types = ["parallel", "reduction"]}
      ins(%x, %s : tensor<8x32xf32>, tensor<8xf32>) outs(%z : tensor<8xf32>) {
    ^bb0(%in: f32, %scale: f32, %acc: f32):
      %e = math.exp %in : f32
      %m = arith.mulf %e, %scale : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<8xf32>
"""

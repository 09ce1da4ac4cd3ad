"""Tasks are IREE's dispatches: unique, structurally keyed, weighted."""

from __future__ import annotations

import pytest
from conftest import matmul_bias_relu

from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.task_extraction import extract_tasks


def test_matmul_bias_relu_is_one_fused_task(small_task):
    task = small_task
    assert task.ops == ("linalg.matmul", "linalg.generic")
    assert task.root.name == "linalg.matmul"
    assert task.root.loop_extents == (128, 128, 128)
    assert task.root.iterator_types == ("parallel", "parallel", "reduction")
    assert task.input_types == ("tensor<128x128xf32>", "tensor<128x128xf32>", "tensor<128xf32>")
    assert task.flops == 2 * 128**3 + 2 * 128 * 128
    assert task.weight == 1
    assert task.default_config is not None
    assert task.default_config.pipeline == "DoubleTilingExpert"
    assert len(task.default_config.level("distribution")) == 3


def test_key_is_structural_across_modules(small_task, target):
    renamed = matmul_bias_relu(128, 128, 128, name="another_name").replace("%bias", "%b2")
    (other,) = extract_tasks(renamed, target, "renamed")
    assert other.key == small_task.key
    (bigger,) = extract_tasks(matmul_bias_relu(128, 256, 128), target, "bigger")
    assert bigger.key != small_task.key


def test_repeated_dispatch_is_weighted(target):
    body = matmul_bias_relu(64, 64, 64)
    twice = body.replace("return %r : tensor<64x64xf32>", "").rstrip().rstrip("}") + """
  %e2 = tensor.empty() : tensor<64x64xf32>
  %f2 = linalg.fill ins(%cst : f32) outs(%e2 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %mm2 = linalg.matmul ins(%r, %b : tensor<64x64xf32>, tensor<64x64xf32>)
      outs(%f2 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %r2 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%mm2, %bias : tensor<64x64xf32>, tensor<64xf32>) outs(%e2 : tensor<64x64xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %s = arith.addf %x, %y : f32
      %z = arith.maximumf %s, %cst : f32
      linalg.yield %z : f32
  } -> tensor<64x64xf32>
  return %r2 : tensor<64x64xf32>
}
"""
    tasks = extract_tasks(twice, target, "twice")
    assert [t.weight for t in tasks] == [2]


def test_dynamic_shapes_are_rejected(target):
    text = "func.func @f(%a: tensor<?x4xf32>) -> tensor<?x4xf32> { return %a : tensor<?x4xf32> }"
    with pytest.raises(AnsorError, match="dynamic shapes"):
        extract_tasks(text, target, "dyn.mlir")


def test_bad_mlir_names_the_input_and_location(target):
    with pytest.raises(AnsorError, match=r"bad\.mlir: not valid MLIR: line 1:14: expected"):
        extract_tasks("func.func @f( {", target, "bad.mlir")

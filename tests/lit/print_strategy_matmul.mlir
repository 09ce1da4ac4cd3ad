// A matmul strategy: workgroup forall with the fill fused, multi-level tiling, contraction lowering.
// RUN: ansor-opt %s --ansor-print-strategy="rule=td-multi-level-tiling seed=0" | FileCheck %s
// RUN: ansor-opt %s --ansor-print-strategy="rule=td-multi-level-tiling seed=0" > %t1
// RUN: ansor-opt %s --ansor-print-strategy="rule=td-multi-level-tiling seed=0" > %t2
// RUN: diff %t1 %t2

// CHECK: transform.named_sequence @ansor_strategy_{{.*}}(%{{.*}}: !transform.any_op {transform.readonly}) attributes {ansor.decisions = {{{.*}}}, ansor.rules = ["td-multi-level-tiling"], ansor.sketch = {{[0-9]+}} : i64, ansor.task = "mm_dispatch_0"}
// CHECK: %[[OP:[a-z0-9_]+]]:2 = transform.split_handle
// CHECK: transform.structured.tile_using_forall %[[OP]]#1 tile_sizes
// CHECK-SAME: mapping = [#gpu.block<y>, #gpu.block<x>]
// CHECK: fuse_into_containing_op %[[OP]]#0 into
// CHECK: transform.structured.tile_using_for
// CHECK: transform.structured.vectorize_children_and_apply_patterns
// CHECK: transform.apply_patterns.vector.lower_contraction
func.func @mm(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %mm : tensor<64x64xf32>
}

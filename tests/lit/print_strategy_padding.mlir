// A 20x36 output (36 columns are not a whole number of vectors: 8 lanes on AVX2, 16 on AVX-512): the
// padding sketch's register tiles need not divide the loops; the root is padded along its parallel loops
// before its reduction is tiled and along the reduction inside it, the fill after its own tiling,
// and the pads are vectorized into out-of-bounds reads and writes. Pinned CPUs: the same on any host.
// RUN: ansor-opt %s --ansor-print-strategy="rule=padding seed=0 cpu=znver3" | FileCheck %s
// RUN: ansor-opt %s --ansor-print-strategy="rule=padding seed=0 cpu=znver4" | FileCheck %s
// RUN: ansor-opt %s --ansor-print-strategy="rule=padding seed=0 cpu=znver4" > %t1
// RUN: ansor-opt %s --ansor-print-strategy="rule=padding seed=0 cpu=znver4" > %t2
// RUN: diff %t1 %t2

// CHECK: transform.named_sequence @ansor_strategy_{{.*}}(%{{.*}}: !transform.any_op {transform.readonly}) attributes {ansor.decisions = {{{.*}}}, ansor.rules = ["td-multi-level-tiling", "padding"], ansor.sketch = {{[0-9]+}} : i64, ansor.task = "{{.*}}"}
// CHECK: %[[OP:[a-z0-9_]+]]:2 = transform.split_handle
// CHECK: transform.structured.tile_using_forall %[[OP]]#1
// CHECK: %[[PADDED:.*]], %{{.*}}, %{{.*}} = transform.structured.pad %{{.*}} <padding_values = [0.000000e+00 : f32, 0.000000e+00 : f32, 0.000000e+00 : f32], padding_dimensions = [0, 1], copy_back_op = "none">
// CHECK: transform.structured.pad %{{.*}} <{{.*}}padding_dimensions = [2], copy_back_op = "none">
// CHECK: transform.structured.pad %{{.*}} <padding_values = [0.000000e+00 : f32, 0.000000e+00 : f32], padding_dimensions = [0, 1], copy_back_op = "none">
// CHECK: transform.structured.vectorize_children_and_apply_patterns %{{[a-z0-9_]+}} <vectorize_padding>
// CHECK: transform.iree.hoist_static_alloc
func.func @mm(%a: tensor<20x44xf32>, %b: tensor<44x36xf32>) -> tensor<20x36xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<20x36xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<20x36xf32>) -> tensor<20x36xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<20x44xf32>, tensor<44x36xf32>) outs(%f : tensor<20x36xf32>) -> tensor<20x36xf32>
  return %mm : tensor<20x36xf32>
}

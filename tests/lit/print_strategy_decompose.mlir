// A stride-2 3x3 convolution: the decompose sketch keeps only oh and kh unit at the register level,
// so a register tile holds several output pixels along ow; the tile is specialized back to
// linalg.conv_2d_nhwc_hwcf and decomposed into a 1-D convolution (strided vector reads), and no
// unit dims are folded (that would turn the 1-D convolution back into a generic).
// RUN: ansor-opt %s --ansor-print-strategy="rule=decompose seed=0" | FileCheck %s
// RUN: ansor-opt %s --ansor-print-strategy="rule=decompose seed=0" > %t1
// RUN: ansor-opt %s --ansor-print-strategy="rule=decompose seed=0" > %t2
// RUN: diff %t1 %t2

// CHECK: transform.named_sequence @ansor_strategy_{{.*}}(%{{.*}}: !transform.any_op {transform.readonly}) attributes {ansor.decisions = {{{.*}}}, ansor.rules = ["td-multi-level-tiling", "decompose"], ansor.sketch = {{[0-9]+}} : i64, ansor.task = "{{.*}}"}
// CHECK: %[[OP:[a-z0-9_]+]]:2 = transform.split_handle
// CHECK: transform.structured.tile_using_forall %[[OP]]#1
// CHECK: %[[NAMED:.*]] = transform.structured.specialize
// CHECK: transform.structured.decompose %[[NAMED]]
// CHECK-NOT: fold_unit_extent_dims_via_slices
// CHECK: transform.structured.vectorize_children_and_apply_patterns %{{[a-z0-9_]+}} :
func.func @conv(%x: tensor<1x16x16x8xf32>, %w: tensor<3x3x8x32xf32>) -> tensor<1x7x7x32xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x7x7x32xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<1x7x7x32xf32>) -> tensor<1x7x7x32xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
      ins(%x, %w : tensor<1x16x16x8xf32>, tensor<3x3x8x32xf32>) outs(%f : tensor<1x7x7x32xf32>) -> tensor<1x7x7x32xf32>
  return %c : tensor<1x7x7x32xf32>
}

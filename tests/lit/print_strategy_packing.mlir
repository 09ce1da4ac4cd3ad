// A linear layer (`x @ W^T`, W stored [out, in]): the output's vector loop reads W across its rows,
// so the packing sketch packs the root by its register vector tile above the register levels
// (W becomes [j/nr, k, nr] panels: a real transpose, tiled into small vector transposes; the
// output's pack and unpack are reshapes), tiles the packed root, and folds no unit dims.
// RUN: ansor-opt %s --ansor-print-strategy="rule=packing seed=0" | FileCheck %s
// RUN: ansor-opt %s --ansor-print-strategy="rule=packing seed=0" > %t1
// RUN: ansor-opt %s --ansor-print-strategy="rule=packing seed=0" > %t2
// RUN: diff %t1 %t2

// CHECK: transform.named_sequence @ansor_strategy_{{.*}}(%{{.*}}: !transform.any_op {transform.readonly}) attributes {ansor.decisions = {{{.*}}}, ansor.rules = ["td-multi-level-tiling-cached", "packing"], ansor.sketch = {{[0-9]+}} : i64, ansor.task = "{{.*}}"}
// CHECK: %[[OP:[a-z0-9_]+]]:2 = transform.split_handle
// CHECK: transform.structured.tile_using_forall %[[OP]]#1
// CHECK: %[[PACKED:.*]] = transform.structured.pack %{{.*}} packed_sizes = [0, {{[0-9]+}}, 0]
// CHECK: %[[W:.*]] = transform.get_producer_of_operand %[[PACKED]][1]
// CHECK: %{{.*}}, %{{.*}}, %[[TR:.*]] = transform.structured.lower_pack %[[W]]
// CHECK: transform.structured.tile_using_for %[[TR]]
// CHECK: transform.get_producer_of_operand %[[PACKED]][2]
// CHECK: transform.structured.lower_unpack
// CHECK-NOT: fold_unit_extent_dims_via_slices
// CHECK: transform.structured.vectorize_children_and_apply_patterns %{{[a-z0-9_]+}} :
// CHECK: transform.iree.hoist_static_alloc
func.func @linear(%x: tensor<32x96xf32>, %w: tensor<64x96xf32>) -> tensor<32x64xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<32x64xf32>) -> tensor<32x64xf32>
  %mm = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (j, k)>,
                                         affine_map<(i, j, k) -> (i, j)>],
                        iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<32x96xf32>, tensor<64x96xf32>) outs(%f : tensor<32x64xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %o, %p : f32
      linalg.yield %s : f32
  } -> tensor<32x64xf32>
  return %mm : tensor<32x64xf32>
}

// A conv with a bias+relu epilogue (batch 1: only the transform family can configure it):
// the conv is tiled to workgroups through its consumer, epilogue fused, windows unit at registers.
// RUN: ansor-opt %s --ansor-print-strategy="rule=td-multi-level-tiling-cached seed=3" | FileCheck %s
// RUN: ansor-opt %s --ansor-generate-sketches | FileCheck %s --check-prefix=SKETCH
// RUN: ansor-opt %s --ansor-generate-sketches | iree-opt --irdl-file=%ansor_irdl > /dev/null

// CHECK: #[[NONE:.+]] = #iree_codegen.translation_info<pipeline = #iree_codegen.no_pipeline>
// CHECK: transform.named_sequence @ansor_strategy_{{.*}}(%{{[a-z0-9_]+}}: !transform.any_op {transform.readonly})
// CHECK: %[[OP:[a-z0-9_]+]]:3 = transform.split_handle
// CHECK: transform.structured.tile_using_forall %[[OP]]#2 tile_sizes
// CHECK: transform.iree.populate_workgroup_count_region_using_num_threads_slice
// CHECK: fuse_into_containing_op %[[OP]]#1 into
// CHECK: fuse_into_containing_op %[[OP]]#0 into
// CHECK: transform.apply_patterns.linalg.fold_unit_extent_dims_via_slices
// CHECK: transform.structured.vectorize_children_and_apply_patterns
// CHECK: transform.iree.bufferize
// CHECK: transform.iree.forall_to_workgroup
// CHECK: transform.apply_patterns.vector.lower_contraction
// CHECK: transform.param.constant #[[NONE]]

// SKETCH: index = 0 : i64, pipeline = "none", rules = ["iree-default"]
// SKETCH: "ansor.choice"() {name = "consumer_fusion", options = ["inner", "outer"]}
// SKETCH: "ansor.strategy"
// SKETCH: family = "transform"
func.func @conv(%x: tensor<1x18x18x16xf32>, %w: tensor<3x3x16x32xf32>, %b: tensor<32xf32>) -> tensor<1x16x16x32xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x16x16x32xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<1x16x16x32xf32>) -> tensor<1x16x16x32xf32>
  %c = linalg.conv_2d_nhwc_hwcf ins(%x, %w : tensor<1x18x18x16xf32>, tensor<3x3x16x32xf32>) outs(%f : tensor<1x16x16x32xf32>) -> tensor<1x16x16x32xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(n, h, w, c) -> (n, h, w, c)>, affine_map<(n, h, w, c) -> (c)>, affine_map<(n, h, w, c) -> (n, h, w, c)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c, %b : tensor<1x16x16x32xf32>, tensor<32xf32>) outs(%e : tensor<1x16x16x32xf32>) {
    ^bb0(%a: f32, %bb: f32, %o: f32):
      %s = arith.addf %a, %bb : f32
      %z = arith.maximumf %s, %cst : f32
      linalg.yield %z : f32
  } -> tensor<1x16x16x32xf32>
  return %r : tensor<1x16x16x32xf32>
}

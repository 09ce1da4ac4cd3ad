// Sketch zero is IREE's own configuration; the others have holes (ansor.knob). Each task keeps its
// function, so sketches are also generated from extracted tasks.
// RUN: ansor-opt %s --ansor-generate-sketches | FileCheck %s
// RUN: ansor-opt %s --ansor-generate-sketches | iree-opt --irdl-file=%ansor_irdl > /dev/null
// RUN: ansor-opt %s --ansor-extract-tasks --ansor-generate-sketches | FileCheck %s

// CHECK: #[[INFO:.+]] = #iree_codegen.compilation_info<lowering_config = #{{.*}}, translation_info = #{{.*}}>
// CHECK: "ansor.task"()
// CHECK: func.func @task
// CHECK: "ansor.sketch"()
// CHECK-NEXT: ^bb0(%[[ROOT:.*]]: !transform.any_op):
// CHECK-NEXT: transform.match.operation_name %[[ROOT]] ["linalg.matmul"]
// CHECK-NEXT: transform.iree.match.cast_compatible_dag_from_root %[[ROOT]]
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<64x64xf32>, %[[B:.*]]: tensor<64x64xf32>, %[[C:.*]]: tensor<64x64xf32>):
// CHECK-NEXT: linalg.matmul ins(%[[A]], %[[B]] : {{.*}}) outs(%[[C]] : tensor<64x64xf32>)
// CHECK: %[[ZERO:.*]] = transform.param.constant #[[INFO]] -> !transform.any_param
// CHECK-NEXT: transform.yield %[[ROOT]], %[[ZERO]] : !transform.any_op, !transform.any_param
// CHECK: family = "pipeline", index = 0 : i64, pipeline = "DoubleTilingExpert", rules = ["iree-default"]
// CHECK: "ansor.sketch"()
// CHECK: %[[D0:.*]] = "ansor.knob"() {dim = 0 : i64, extent = 64 : i64, kind = "S", levels = ["distribution", "vector_common_parallel"], name = "d0", padded = false}
// CHECK: %[[D1:.*]] = "ansor.knob"() {dim = 1 : i64
// CHECK: %[[D2:.*]] = "ansor.knob"() {dim = 2 : i64, extent = 64 : i64, kind = "R", levels = ["vector_reduction"], name = "d2", padded = false}
// CHECK: "ansor.compilation_info"(%[[D0]], %[[D1]], %[[D2]])
// CHECK: rules = ["multi-level-tiling"]
// CHECK: "ansor.sketch"()
// CHECK: levels = ["distribution", "cache_parallel", "vector_common_parallel"]
// CHECK: levels = ["cache_reduction", "vector_reduction"]
// CHECK: rules = ["multi-level-tiling-cached"]
// CHECK: "ansor.sketch"()
// CHECK: "ansor.strategy"
// CHECK-SAME: strategy = "ansor_strategy_{{.*}}_s3"
// CHECK: family = "transform"
func.func @mm(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>, %bias: tensor<64xf32>) -> tensor<64x64xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<64x64xf32>, tensor<64x64xf32>)
      outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bias : tensor<64x64xf32>, tensor<64xf32>) outs(%e : tensor<64x64xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %s = arith.addf %x, %y : f32
      %z = arith.maximumf %s, %cst : f32
      linalg.yield %z : f32
  } -> tensor<64x64xf32>
  return %r : tensor<64x64xf32>
}

// The matmul, its fill and its bias+relu epilogue form one IREE dispatch: one task.
// RUN: ansor-opt %s --ansor-extract-tasks | FileCheck %s
// RUN: ansor-opt %s --ansor-extract-tasks | iree-opt --irdl-file=%ansor_irdl | FileCheck %s

// CHECK: "ansor.task"()
// CHECK: func.func @task(%arg0: tensor<64x64xf32>, %arg1: tensor<64x64xf32>, %arg2: tensor<64xf32>)
// CHECK: linalg.fill
// CHECK: linalg.matmul
// CHECK: arith.maximumf
// CHECK: flops = 532480 : i64
// CHECK-SAME: iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-SAME: key = "373b436019a0287f"
// CHECK-SAME: loop_extents = array<i64: 64, 64, 64>
// CHECK-SAME: pipeline = "DoubleTilingExpert"
// CHECK-SAME: root = "linalg.matmul"
// CHECK-SAME: weight = 1 : i64
// CHECK-NOT: "ansor.task"
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

// Channels-last: an NCHW depthwise convolution as importers lower it becomes the NHWC op between transposes
// (input and filter in, result out), which IREE cancels between neighbouring ops; an NCHW convolution goes
// through IREE's own conv-to-channels-last pass. Tasks are then channels-last; rewrites=none keeps the program.
// RUN: ansor-opt %s --ansor-rewrite | FileCheck %s
// RUN: ansor-opt %s --ansor-rewrite="rewrites=none" | FileCheck %s --check-prefix=NONE
// RUN: ansor-opt %s --ansor-extract-tasks="cpu=znver3" | FileCheck %s --check-prefix=TASKS

// CHECK-LABEL: func.func @block
// CHECK-DAG: %[[W:.+]] = linalg.transpose ins(%arg1 : tensor<16x3x3xf32>) outs(%{{.+}} : tensor<3x3x16xf32>) permutation = [1, 2, 0]
// CHECK-DAG: %[[X:.+]] = linalg.transpose ins(%arg0 : tensor<1x16x10x10xf32>) outs(%{{.+}} : tensor<1x10x10x16xf32>) permutation = [0, 2, 3, 1]
// CHECK: linalg.depthwise_conv_2d_nhwc_hwc {{.*}}strides = dense<1>{{.*}} ins(%[[X]], %[[W]] : tensor<1x10x10x16xf32>, tensor<3x3x16xf32>) outs(%{{.+}} : tensor<1x8x8x16xf32>)
// CHECK-NOT: nchw
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} -> tensor<1x6x6x4xf32>
// CHECK-NOT: nchw
// CHECK: return
// NONE: linalg.depthwise_conv_2d_nchw_chw
// NONE: linalg.conv_2d_nchw_fchw
// Both ops are tasks, their channels innermost: depthwise (OH, OW, C, KH, KW), the convolution (OH, OW, F, C, KH, KW).
// TASKS-DAG: loop_extents = array<i64: 8, 8, 16, 3, 3>
// TASKS-DAG: loop_extents = array<i64: 6, 6, 4, 16, 3, 3>

func.func @block(%x: tensor<1x16x10x10xf32>, %wd: tensor<16x3x3xf32>, %wc: tensor<4x16x3x3xf32>) -> tensor<1x4x6x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x16x8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %d = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
       ins(%x, %wd : tensor<1x16x10x10xf32>, tensor<16x3x3xf32>) outs(%f : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %e2 = tensor.empty() : tensor<1x4x6x6xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
       ins(%d, %wc : tensor<1x16x8x8xf32>, tensor<4x16x3x3xf32>) outs(%f2 : tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  return %c : tensor<1x4x6x6xf32>
}

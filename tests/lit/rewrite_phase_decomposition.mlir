// Phase decomposition: a transposed convolution as importers lower it (a stride-1 convolution over its input
// scattered with stride 2 into zeros, here 3x3 taps, padding 1, output padding 1) becomes one stride-1
// convolution per output phase over the input itself, with that phase's taps of the filter; the phases are
// interleaved with strided insert_slices. Every pass sees the rewritten program; rewrites=none keeps it.
// RUN: ansor-opt %s --ansor-rewrite | FileCheck %s
// RUN: ansor-opt %s --ansor-rewrite="rewrites=none" | FileCheck %s --check-prefix=NONE
// RUN: ansor-opt %s --ansor-extract-tasks="cpu=znver4" | FileCheck %s --check-prefix=TASKS
// RUN: ansor-opt %s --ansor-extract-tasks="cpu=znver4 rewrites=none" | FileCheck %s --check-prefix=TASKS-NONE

// CHECK-LABEL: func.func @t2d
// CHECK-NOT: tensor.insert_slice %arg0
// Phase (0, 0): the centre tap only, no padding.
// CHECK: %[[W00:.+]] = tensor.extract_slice %arg1[1, 1, 0, 0] [1, 1, 8, 4] [2, 2, 1, 1] : tensor<3x3x8x4xf32> to tensor<1x1x8x4xf32>
// CHECK: %[[Y00:.+]] = linalg.conv_2d_nhwc_hwcf {{.*}} ins(%arg0, %[[W00]] : tensor<1x5x5x8xf32>, tensor<1x1x8x4xf32>) outs(%{{.+}} : tensor<1x5x5x4xf32>)
// CHECK: %[[I00:.+]] = tensor.insert_slice %[[Y00]] into %{{.+}}[0, 0, 0, 0] [1, 5, 5, 4] [1, 2, 2, 1] : tensor<1x5x5x4xf32> into tensor<1x10x10x4xf32>
// Phase (0, 1): one row of taps, two columns; the input padded by one column.
// CHECK: tensor.pad %arg0 low[0, 0, 0, 0] high[0, 0, 1, 0]
// CHECK: tensor.extract_slice %arg1[1, 0, 0, 0] [1, 2, 8, 4] [2, 2, 1, 1]
// CHECK: linalg.conv_2d_nhwc_hwcf
// CHECK: tensor.insert_slice %{{.+}} into %[[I00]][0, 0, 1, 0] [1, 5, 5, 4] [1, 2, 2, 1]
// CHECK: linalg.conv_2d_nhwc_hwcf
// CHECK: tensor.insert_slice {{.+}}[0, 1, 0, 0] [1, 5, 5, 4] [1, 2, 2, 1]
// Phase (1, 1): all four corner taps over the input padded by one row and one column.
// CHECK: tensor.pad %arg0 low[0, 0, 0, 0] high[0, 1, 1, 0]
// CHECK: tensor.extract_slice %arg1[0, 0, 0, 0] [2, 2, 8, 4] [2, 2, 1, 1]
// CHECK: linalg.conv_2d_nhwc_hwcf {{.*}} tensor<1x6x6x8xf32>, tensor<2x2x8x4xf32>
// CHECK: %[[LAST:.+]] = tensor.insert_slice {{.+}}[0, 1, 1, 0] [1, 5, 5, 4] [1, 2, 2, 1]
// CHECK-NOT: linalg.conv
// CHECK: return %[[LAST]]

// NONE: tensor.insert_slice %arg0 into %{{.+}}[0, 1, 1, 0] [1, 5, 5, 8] [1, 2, 2, 1]
// NONE: linalg.conv_2d_nhwc_hwcf {{.*}} tensor<1x12x12x8xf32>, tensor<3x3x8x4xf32>

// Four convolution tasks of 1, 2, 2 and 4 taps (a quarter of the 9 x 100 MACs of one over the zeros).
// TASKS-COUNT-4: ansor.task
// TASKS-NOT: ansor.task
// TASKS-NONE-COUNT-1: ansor.task
// TASKS-NONE-NOT: ansor.task

func.func @t2d(%x: tensor<1x5x5x8xf32>, %w: tensor<3x3x8x4xf32>) -> tensor<1x10x10x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x12x12x8xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%e : tensor<1x12x12x8xf32>) -> tensor<1x12x12x8xf32>
  %z = tensor.insert_slice %x into %zeros[0, 1, 1, 0] [1, 5, 5, 8] [1, 2, 2, 1]
      : tensor<1x5x5x8xf32> into tensor<1x12x12x8xf32>
  %oe = tensor.empty() : tensor<1x10x10x4xf32>
  %init = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x10x10x4xf32>) -> tensor<1x10x10x4xf32>
  %y = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%z, %w : tensor<1x12x12x8xf32>, tensor<3x3x8x4xf32>) outs(%init : tensor<1x10x10x4xf32>) -> tensor<1x10x10x4xf32>
  return %y : tensor<1x10x10x4xf32>
}

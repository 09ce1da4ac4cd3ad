module {
  func.func @dep(%arg0: tensor<1x8x8x16xf32>, %arg1: tensor<3x3x16xf32>) -> (tensor<1x8x8x16xf32>) {
    %zero = arith.constant 0.0 : f32
    %v0 = tensor.pad %arg0 low[0, 1, 1, 0] high[0, 1, 1, 0] {
      ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
        tensor.yield %zero : f32
      } : tensor<1x8x8x16xf32> to tensor<1x10x10x16xf32>
    %v1 = tensor.empty() : tensor<1x8x8x16xf32>
    %v2 = linalg.fill ins(%zero : f32) outs(%v1 : tensor<1x8x8x16xf32>) -> tensor<1x8x8x16xf32>
    %v3 = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<[1, 1]> : tensor<2xi64>, strides = dense<[1, 1]> : tensor<2xi64>} ins(%v0, %arg1 : tensor<1x10x10x16xf32>, tensor<3x3x16xf32>) outs(%v2 : tensor<1x8x8x16xf32>) -> tensor<1x8x8x16xf32>
    return %v3 : tensor<1x8x8x16xf32>
  }
}

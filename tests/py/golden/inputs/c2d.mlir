module {
  func.func @c2d(%arg0: tensor<1x14x14x3xf32>, %arg1: tensor<3x3x3x16xf32>) -> (tensor<1x7x7x16xf32>) {
    %zero = arith.constant 0.0 : f32
    %v0 = tensor.pad %arg0 low[0, 1, 1, 0] high[0, 1, 1, 0] {
      ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
        tensor.yield %zero : f32
      } : tensor<1x14x14x3xf32> to tensor<1x16x16x3xf32>
    %v1 = tensor.empty() : tensor<1x7x7x16xf32>
    %v2 = linalg.fill ins(%zero : f32) outs(%v1 : tensor<1x7x7x16xf32>) -> tensor<1x7x7x16xf32>
    %v3 = linalg.conv_2d_nhwc_hwcf {dilations = dense<[1, 1]> : tensor<2xi64>, strides = dense<[2, 2]> : tensor<2xi64>} ins(%v0, %arg1 : tensor<1x16x16x3xf32>, tensor<3x3x3x16xf32>) outs(%v2 : tensor<1x7x7x16xf32>) -> tensor<1x7x7x16xf32>
    return %v3 : tensor<1x7x7x16xf32>
  }
}

func.func @conv(%x: tensor<1x56x56x64xf32>, %w: tensor<3x3x64x64xf32>) -> tensor<1x54x54x64xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x54x54x64xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<1x54x54x64xf32>) -> tensor<1x54x54x64xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x56x56x64xf32>, tensor<3x3x64x64xf32>) outs(%f : tensor<1x54x54x64xf32>) -> tensor<1x54x54x64xf32>
  return %c : tensor<1x54x54x64xf32>
}

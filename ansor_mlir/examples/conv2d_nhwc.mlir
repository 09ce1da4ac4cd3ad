func.func @conv(%x: tensor<1x56x56x64xf32>, %w: tensor<3x3x64x64xf32>) -> tensor<1x56x56x64xf32> {
  %cst = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0,1,1,0] high[0,1,1,0] { ^bb0(%i: index, %j: index, %k: index, %l: index): tensor.yield %cst : f32 } : tensor<1x56x56x64xf32> to tensor<1x58x58x64xf32>
  %e = tensor.empty() : tensor<1x56x56x64xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<1x56x56x64xf32>) -> tensor<1x56x56x64xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%p, %w : tensor<1x58x58x64xf32>, tensor<3x3x64x64xf32>) outs(%f : tensor<1x56x56x64xf32>) -> tensor<1x56x56x64xf32>
  return %c : tensor<1x56x56x64xf32>
}

func.func @mm(%a: tensor<512x512xf16>, %b: tensor<512x512xf16>) -> tensor<512x512xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<512x512xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<512x512xf32>) -> tensor<512x512xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<512x512xf16>, tensor<512x512xf16>) outs(%f : tensor<512x512xf32>) -> tensor<512x512xf32>
  return %mm : tensor<512x512xf32>
}


func.func @mm(%a: tensor<109x109xf32>, %b: tensor<109x109xf32>, %bias: tensor<109xf32>) -> tensor<109x109xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<109x109xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<109x109xf32>) -> tensor<109x109xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<109x109xf32>, tensor<109x109xf32>)
      outs(%f : tensor<109x109xf32>) -> tensor<109x109xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bias : tensor<109x109xf32>, tensor<109xf32>) outs(%e : tensor<109x109xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %s = arith.addf %x, %y : f32
      %z = arith.maximumf %s, %cst : f32
      linalg.yield %z : f32
  } -> tensor<109x109xf32>
  return %r : tensor<109x109xf32>
}

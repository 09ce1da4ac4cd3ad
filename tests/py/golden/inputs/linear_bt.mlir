
func.func @mm(%a: tensor<64x128xf32>, %b: tensor<96x128xf32>, %bias: tensor<96xf32>) -> tensor<64x96xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x96xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<64x96xf32>) -> tensor<64x96xf32>
  %mm = linalg.generic {indexing_maps = [affine_map<(i, j, l) -> (i, l)>,
                                         affine_map<(i, j, l) -> (j, l)>,
                                         affine_map<(i, j, l) -> (i, j)>],
                        iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<64x128xf32>, tensor<96x128xf32>) outs(%f : tensor<64x96xf32>) {
    ^bb0(%p: f32, %q: f32, %acc: f32):
      %t = arith.mulf %p, %q : f32
      %u = arith.addf %acc, %t : f32
      linalg.yield %u : f32
  } -> tensor<64x96xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bias : tensor<64x96xf32>, tensor<96xf32>) outs(%e : tensor<64x96xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %s = arith.addf %x, %y : f32
      %z = arith.maximumf %s, %cst : f32
      linalg.yield %z : f32
  } -> tensor<64x96xf32>
  return %r : tensor<64x96xf32>
}

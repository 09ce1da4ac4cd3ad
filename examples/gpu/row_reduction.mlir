func.func @rowsum(%a: tensor<1024x4096xf32>) -> tensor<1024xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1024xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<1024xf32>) -> tensor<1024xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i,j)->(i,j)>, affine_map<(i,j)->(i)>], iterator_types = ["parallel","reduction"]}
     ins(%a : tensor<1024x4096xf32>) outs(%f : tensor<1024xf32>) {
   ^bb0(%x: f32, %o: f32):
     %s = arith.addf %x, %o : f32
     linalg.yield %s : f32
  } -> tensor<1024xf32>
  return %r : tensor<1024xf32>
}

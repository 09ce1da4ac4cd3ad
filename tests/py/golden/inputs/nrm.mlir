module {
  func.func @nrm(%arg0: tensor<1x64x64xf32>) -> (tensor<1xf32>) {
    %zero = arith.constant 0.0 : f32
    %v0 = tensor.empty() : tensor<1xf32>
    %v1 = linalg.fill ins(%zero : f32) outs(%v0 : tensor<1xf32>) -> tensor<1xf32>
    %v2 = linalg.generic {indexing_maps = [affine_map<(b, m, n) -> (b, m, n)>, affine_map<(b, m, n) -> (b)>], iterator_types = ["parallel", "reduction", "reduction"]}
        ins(%arg0 : tensor<1x64x64xf32>) outs(%v1 : tensor<1xf32>) {
      ^bb0(%in0: f32, %acc: f32):
        %m = arith.mulf %in0, %in0 : f32
        %r = arith.addf %acc, %m : f32
        linalg.yield %r : f32
      } -> tensor<1xf32>
    %v3 = tensor.empty() : tensor<1xf32>
    %v4 = linalg.generic {indexing_maps = [affine_map<(b) -> (b)>, affine_map<(b) -> (b)>], iterator_types = ["parallel"]}
        ins(%v2 : tensor<1xf32>) outs(%v3 : tensor<1xf32>) {
      ^bb0(%in0: f32, %acc: f32):
        %r = math.sqrt %in0 : f32
        linalg.yield %r : f32
      } -> tensor<1xf32>
    return %v4 : tensor<1xf32>
  }
}

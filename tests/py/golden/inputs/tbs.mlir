module {
  func.func @tbs(%arg0: tensor<1x16x2x16xf32>, %arg1: tensor<1x16x2x16xf32>) -> (tensor<1x2x16x16xf32>) {
    %zero = arith.constant 0.0 : f32
    %v0 = tensor.empty() : tensor<1x2x16x16xf32>
    %v1 = linalg.transpose ins(%arg0 : tensor<1x16x2x16xf32>) outs(%v0 : tensor<1x2x16x16xf32>) permutation = [0, 2, 1, 3]
    %v2 = tensor.empty() : tensor<1x2x16x16xf32>
    %v3 = linalg.transpose ins(%arg1 : tensor<1x16x2x16xf32>) outs(%v2 : tensor<1x2x16x16xf32>) permutation = [0, 2, 3, 1]
    %v4 = tensor.empty() : tensor<1x2x16x16xf32>
    %v5 = linalg.fill ins(%zero : f32) outs(%v4 : tensor<1x2x16x16xf32>) -> tensor<1x2x16x16xf32>
    %v6 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, d, j)>, affine_map<(b, h, i, j, d) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
        ins(%v1, %v3 : tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) outs(%v5 : tensor<1x2x16x16xf32>) {
      ^bb0(%in0: f32, %in1: f32, %acc: f32):
        %m = arith.mulf %in0, %in1 : f32
        %r = arith.addf %acc, %m : f32
        linalg.yield %r : f32
      } -> tensor<1x2x16x16xf32>
    return %v6 : tensor<1x2x16x16xf32>
  }
}

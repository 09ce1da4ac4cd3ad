module {
  func.func @softmax(%arg0: tensor<256x1024xf32>) -> (tensor<256x1024xf32>) {
    %zero = arith.constant 0.0 : f32
    %c0 = arith.constant 0xFF800000 : f32
    %v1 = tensor.empty() : tensor<256xf32>
    %v2 = linalg.fill ins(%c0 : f32) outs(%v1 : tensor<256xf32>) -> tensor<256xf32>
    %v3 = linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>], iterator_types = ["parallel", "reduction"]}
        ins(%arg0 : tensor<256x1024xf32>) outs(%v2 : tensor<256xf32>) {
      ^bb0(%in0: f32, %acc: f32):
        %r = arith.maximumf %acc, %in0 : f32
        linalg.yield %r : f32
      } -> tensor<256xf32>
    %v4 = tensor.empty() : tensor<256xf32>
    %v5 = linalg.fill ins(%zero : f32) outs(%v4 : tensor<256xf32>) -> tensor<256xf32>
    %v6 = linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>, affine_map<(r, c) -> (r)>], iterator_types = ["parallel", "reduction"]}
        ins(%arg0, %v3 : tensor<256x1024xf32>, tensor<256xf32>) outs(%v5 : tensor<256xf32>) {
      ^bb0(%in0: f32, %in1: f32, %acc: f32):
        %d = arith.subf %in0, %in1 : f32
        %e = math.exp %d : f32
        %r = arith.addf %acc, %e : f32
        linalg.yield %r : f32
      } -> tensor<256xf32>
    %v7 = tensor.empty() : tensor<256x1024xf32>
    %v8 = linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>, affine_map<(r, c) -> (r)>, affine_map<(r, c) -> (r, c)>], iterator_types = ["parallel", "parallel"]}
        ins(%arg0, %v3, %v6 : tensor<256x1024xf32>, tensor<256xf32>, tensor<256xf32>) outs(%v7 : tensor<256x1024xf32>) {
      ^bb0(%in0: f32, %in1: f32, %in2: f32, %acc: f32):
        %d = arith.subf %in0, %in1 : f32
        %e = math.exp %d : f32
        %r = arith.divf %e, %in2 : f32
        linalg.yield %r : f32
      } -> tensor<256x1024xf32>
    return %v8 : tensor<256x1024xf32>
  }
}


module {
  func.func @conv_layer(%arg0: tensor<1x14x14x8xf32>, %arg1: tensor<3x3x8x16xf32>, %arg2: tensor<16xf32>, %arg3: tensor<16xf32>, %arg4: tensor<16xf32>) -> (tensor<1x7x7x16xf32>) {
    %zero = arith.constant 0.0 : f32
    %v0 = tensor.pad %arg0 low[0, 1, 1, 0] high[0, 1, 1, 0] {
      ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
        tensor.yield %zero : f32
      } : tensor<1x14x14x8xf32> to tensor<1x16x16x8xf32>
    %v1 = tensor.empty() : tensor<1x7x7x16xf32>
    %v2 = linalg.fill ins(%zero : f32) outs(%v1 : tensor<1x7x7x16xf32>) -> tensor<1x7x7x16xf32>
    %v3 = linalg.conv_2d_nhwc_hwcf {dilations = dense<[1, 1]> : tensor<2xi64>, strides = dense<[2, 2]> : tensor<2xi64>} ins(%v0, %arg1 : tensor<1x16x16x8xf32>, tensor<3x3x8x16xf32>) outs(%v2 : tensor<1x7x7x16xf32>) -> tensor<1x7x7x16xf32>
    %v4 = tensor.empty() : tensor<1x7x7x16xf32>
    %v5 = linalg.generic {indexing_maps = [affine_map<(n, h, w, c) -> (n, h, w, c)>, affine_map<(n, h, w, c) -> (c)>, affine_map<(n, h, w, c) -> (c)>, affine_map<(n, h, w, c) -> (c)>, affine_map<(n, h, w, c) -> (n, h, w, c)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
        ins(%v3, %arg2, %arg3, %arg4 : tensor<1x7x7x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) outs(%v4 : tensor<1x7x7x16xf32>) {
      ^bb0(%in0: f32, %in1: f32, %in2: f32, %in3: f32, %acc: f32):
        %b = arith.addf %in0, %in1 : f32
        %m = arith.mulf %b, %in2 : f32
        %s = arith.addf %m, %in3 : f32
        %r = arith.maximumf %s, %zero : f32
        linalg.yield %r : f32
      } -> tensor<1x7x7x16xf32>
    return %v5 : tensor<1x7x7x16xf32>
  }
}

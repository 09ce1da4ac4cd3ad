// GPU sketches for target=cuda:sm_80: sketch zero is IREE's own configuration (nothing attached); the others
// say how they map the root to blocks, threads, shared memory and registers (ansor.gpu_mapping), and leave
// IREE GPU pipeline configurations open: block/thread tiles (TileAndFuse), tensor-core instructions of the
// target for f16 x f16 -> f32 (NV_MMA_SYNC), a cross-thread reduction for a row reduction (VectorDistribute);
// and the same block/thread tiles as a transform-dialect strategy (the transform family).
// RUN: ansor-opt %s --split-input-file --ansor-generate-sketches="target=cuda:sm_80" | FileCheck %s
// RUN: ansor-opt %s --split-input-file --ansor-generate-sketches="target=cuda:sm_80" | iree-opt --split-input-file --irdl-file=%ansor_irdl > /dev/null

// CHECK: "ansor.task"()
// CHECK: transform.param.constant unit
// CHECK: family = "pipeline", index = 0 : i64, pipeline = "none", rules = ["iree-default"]
// CHECK: "ansor.gpu_mapping"() {blocks = "d0 by its workgroup tile, d1 by its workgroup tile", registers = "the thread tile's accumulators across d2", shared_memory = "operands 0, 1: block tile x reduction step (promote_operands)", threads = "d0 by workgroup/thread, d1 by workgroup/thread"}
// CHECK: "ansor.knob"() {dim = 0 : i64, extent = 256 : i64, kind = "S", levels = ["workgroup", "thread"], name = "d0"
// CHECK: "ansor.knob"() {dim = 2 : i64, extent = 128 : i64, kind = "R", levels = ["reduction"], name = "d2"
// CHECK: "ansor.choice"() {name = "promote_operands", options = ["shared", "none"]}
// CHECK: "ansor.compilation_info"({{.*}}) {levels = ["workgroup", "reduction", "thread"], pipeline = "TileAndFuse"}
// CHECK: rules = ["gpu-multi-level-tiling"]
// CHECK: "ansor.gpu_mapping"() {blocks = "d0, d1 by warps_m x subgroup_m x M, warps_n x subgroup_n x N of mma_kind"
// CHECK: "ansor.choice"() {name = "mma_kind", options = ["NV_MMA_SYNC_F32_16x8x16_F16"]}
// CHECK: "ansor.compilation_info"({{.*}}) {levels = ["workgroup", "reduction", "subgroup"], pipeline = "TileAndFuse"}
// CHECK: rules = ["gpu-multi-level-tiling", "tensor-core"]
// CHECK: "ansor.gpu_mapping"() {blocks = "d0 by its workgroup tile, d1 by its workgroup tile"
// CHECK: "ansor.strategy"({{.*}}) {levels = ["workgroup", "reduction", "thread"], root = "linalg.generic"
// CHECK: family = "transform", index = {{[0-9]+}} : i64, pipeline = "TransformDialectCodegen", rules = ["gpu-td-multi-level-tiling"]
func.func @matmul_f16(%a: tensor<256x128xf16>, %b: tensor<128x256xf16>) -> tensor<256x256xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<256x256xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<256x256xf32>) -> tensor<256x256xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<256x128xf16>, tensor<128x256xf16>) outs(%f : tensor<256x256xf32>) -> tensor<256x256xf32>
  return %mm : tensor<256x256xf32>
}

// -----

// CHECK: "ansor.task"()
// CHECK: rules = ["iree-default"]
// CHECK: rules = ["gpu-multi-level-tiling"]
// CHECK: "ansor.gpu_mapping"() {blocks = "d0 by rows, other parallel loops by 1", registers = "vector x unroll x rows partial sums per lane", shared_memory = "one partial result per warp and row, combined after the lanes' shuffle", threads = "d1 across warps x lanes, vector elements per lane, unroll steps"}
// CHECK: "ansor.choice"() {name = "warps", options = ["1", "2", "4", "8", "16", "32"]}
// CHECK: "ansor.choice"() {name = "vector", options = ["1", "2", "4"]}
// CHECK: levels = ["workgroup", "partial_reduction", "thread"], pipeline = "VectorDistribute"
// CHECK: rules = ["cross-thread-reduction"]
func.func @row_sum(%a: tensor<64x2048xf32>) -> tensor<64xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<64xf32>) -> tensor<64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<64x2048xf32>) outs(%f : tensor<64xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %o : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}

// Named ARM CPUs are targets (`target=aarch64:CPU`): sketches are derived for what IREE vectorizes for on them.
// IREE 3.13 resolves every AArch64 CPU to 16-byte vectors (NEON; `native_vector_size = 16`), SVE ones too:
// neoverse-v1's 256-bit SVE is used only by IREE's opt-in scalable vectorization. So both CPUs get 4-lane f32
// register tiles (nr a multiple of 4) filling 32 vector registers, where an AVX2 x86 CPU gets 8-lane ones
// (nr a multiple of 8) in 16 registers.
// RUN: ansor-opt %s --ansor-generate-sketches="target=aarch64:neoverse-v1" | FileCheck %s --check-prefix=NEON
// RUN: ansor-opt %s --ansor-generate-sketches="target=aarch64:neoverse-n1" | FileCheck %s --check-prefix=NEON
// RUN: ansor-opt %s --ansor-generate-sketches="cpu=znver3" | FileCheck %s --check-prefix=AVX2
// RUN: not ansor-opt %s --ansor-generate-sketches="target=aarch64:m68k" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// NEON: "ansor.task"()
// NEON: rules = ["iree-default"]
// NEON: "ansor.choice"() {name = "micro_kernel", options = ["16x4", "8x8", "14x8", "4x16", "6x16"]}
// NEON: rules = ["td-multi-level-tiling-cached", "micro-kernel"]
// NEON: "ansor.choice"() {name = "micro_kernel", options = ["16x4", "8x8", "4x16"]}
// NEON: rules = ["multi-level-tiling", "micro-kernel"]

// AVX2: "ansor.choice"() {name = "micro_kernel", options = ["8x8", "4x16", "6x16", "2x32"]}
// AVX2: "ansor.choice"() {name = "micro_kernel", options = ["8x8", "4x16", "2x32"]}

// UNKNOWN: error: {{.*}}invalid target=aarch64:m68k: valid choices are llvm-cpu, aarch64:neoverse-v1, aarch64:neoverse-n1

func.func @mm(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %r = linalg.matmul ins(%a, %b : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %r : tensor<64x64xf32>
}

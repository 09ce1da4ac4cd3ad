// Apply the best correct record for this target from a checked-in log: the
// faster wrong answer and the record for another CPU are never applied, the
// corrupt line is skipped with a warning, and plain iree-compile builds it.
// RUN: ansor-opt %s --ansor-apply-best="log=%S/Inputs/mm64_log.jsonl" -o %t.mlir 2>%t.err
// RUN: FileCheck %s < %t.mlir
// RUN: FileCheck %s --check-prefix=WARN < %t.err
// RUN: iree-compile %t.mlir -o %t.vmfb
// RUN: ansor-opt %s --pass-pipeline="builtin.module(ansor-apply-best{log=%S/Inputs/mm64_log.jsonl})" 2>/dev/null | FileCheck %s
// The same from the tasks' own IR (passes chain), and the warning stated in this file:
// RUN: ansor-opt %s --ansor-extract-tasks --ansor-generate-sketches --ansor-apply-best="log=%S/Inputs/mm64_log.jsonl" 2>/dev/null | FileCheck %s
// RUN: ansor-opt %s --verify-diagnostics --ansor-apply-best="log=%S/Inputs/mm64_log.jsonl" > /dev/null

// WARN: mm64_log.jsonl:4: skipping corrupt record
// CHECK: #[[CONFIG:.+]] = #iree_cpu.lowering_config<distribution = [32, 64, 0], vector_common_parallel = [4, 16, 0], vector_reduction = [0, 0, 4]>
// CHECK: #[[TRANSLATION:.+]] = #iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<DoubleTilingExpert>>
// CHECK: #[[INFO:.+]] = #iree_codegen.compilation_info<lowering_config = #[[CONFIG]], translation_info = #[[TRANSLATION]]>
// CHECK: flow.executable
// CHECK: linalg.matmul {compilation_info = #[[INFO]]}
// CHECK-NOT: distribution = [16, 32, 0]
// CHECK-NOT: distribution = [8, 16, 0]
// expected-warning @below {{mm64_log.jsonl:4: skipping corrupt record}}
func.func @mm(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>, %bias: tensor<64xf32>) -> tensor<64x64xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<64x64xf32>, tensor<64x64xf32>)
      outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bias : tensor<64x64xf32>, tensor<64xf32>) outs(%e : tensor<64x64xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %s = arith.addf %x, %y : f32
      %z = arith.maximumf %s, %cst : f32
      linalg.yield %z : f32
  } -> tensor<64x64xf32>
  return %r : tensor<64x64xf32>
}

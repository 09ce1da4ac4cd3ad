// Passes chain: each reads the previous one's output. Three passes on the command line and the same
// as a --pass-pipeline give the same IR; --mlir-print-ir-after-all shows each pass's output. The
// matmul runs twice: one task of weight 2, kept when the tasks' own IR is read again.
// RUN: ansor-opt %s --ansor-extract-tasks --ansor-generate-sketches --ansor-print-strategy="seed=0 rule=td-multi-level-tiling" > %t.flags
// RUN: ansor-opt %s --mlir-print-ir-after-all --pass-pipeline="builtin.module(ansor-extract-tasks, ansor-generate-sketches, ansor-print-strategy{seed=0 rule=td-multi-level-tiling})" > %t.pipeline 2> %t.dump
// RUN: diff %t.flags %t.pipeline
// RUN: FileCheck %s < %t.flags
// RUN: FileCheck %s --check-prefix=DUMP < %t.dump

// CHECK: module attributes {transform.with_named_sequence}
// CHECK: transform.named_sequence @ansor_strategy_{{.*}} attributes {{{.*}}ansor.rules = ["td-multi-level-tiling"], ansor.sketch = {{[0-9]+}} : i64, ansor.task = "mm2_dispatch_0"}
// CHECK: transform.structured.tile_using_forall
// CHECK-NOT: transform.named_sequence

// DUMP: // -----// IR Dump After ansor-extract-tasks (pass 1) //----- //
// DUMP: "ansor.task"()
// DUMP-NOT: "ansor.sketch"
// DUMP: name = "mm2_dispatch_0", {{.*}}weight = 2 : i64
// DUMP-NEXT: }
// DUMP-NEXT: // -----// IR Dump After ansor-generate-sketches (pass 2) //----- //
// DUMP: "ansor.task"()
// DUMP: "ansor.sketch"()
// DUMP: name = "mm2_dispatch_0", {{.*}}weight = 2 : i64
// DUMP: // -----// IR Dump After ansor-print-strategy (pass 3) //----- //
// DUMP: transform.named_sequence @ansor_strategy_
func.func @mm2(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>, %c: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %1 = linalg.matmul ins(%a, %c : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %0, %1 : tensor<64x64xf32>, tensor<64x64xf32>
}

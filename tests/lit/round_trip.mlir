// Every pass's output is valid input: ansor-opt parses it back and prints the same text, and stock
// iree-opt accepts it (with the ansor dialect loaded from its IRDL definition). The seven outputs are
// joined as chunks of one file, read back with --split-input-file.
// RUN: ansor-opt %s --ansor-extract-tasks > %t.tasks
// RUN: ansor-opt %s --ansor-generate-sketches > %t.sketches
// RUN: ansor-opt %s --ansor-tune="trials=1 batch-size=1 progress=0 log=%t.log" > %t.tuned 2> /dev/null
// RUN: ansor-opt %s --ansor-apply-best="log=%S/Inputs/mm64_log.jsonl" > %t.applied 2> /dev/null
// RUN: ansor-opt %s --ansor-emit-tuning-spec="log=%S/Inputs/mm64_log.jsonl" > %t.spec 2> /dev/null
// RUN: ansor-opt %s --ansor-emit-transform-library="log=%t.log" > %t.library
// RUN: ansor-opt %s --ansor-print-strategy="seed=0 rule=td-multi-level-tiling" > %t.strategy
// RUN: cat %t.tasks %S/Inputs/split_marker.mlir %t.sketches %S/Inputs/split_marker.mlir %t.tuned \
// RUN:     %S/Inputs/split_marker.mlir %t.applied %S/Inputs/split_marker.mlir %t.spec \
// RUN:     %S/Inputs/split_marker.mlir %t.library %S/Inputs/split_marker.mlir %t.strategy > %t.all
// RUN: ansor-opt --split-input-file %t.all > %t.again
// RUN: diff %t.all %t.again
// RUN: iree-opt --split-input-file --irdl-file=%ansor_irdl %t.all > /dev/null
// RUN: FileCheck %s < %t.all

// Each chunk is what its pass prints.
// CHECK: "ansor.task"()
// CHECK-NOT: "ansor.sketch"
// CHECK: // -----
// CHECK: "ansor.sketch"()
// CHECK: // -----
// CHECK: flow.executable
// CHECK: // -----
// CHECK: linalg.matmul {compilation_info =
// CHECK: // -----
// CHECK: module @ansor_tuning_spec
// CHECK: // -----
// CHECK: module @ansor_transform_library
// CHECK: // -----
// CHECK: transform.named_sequence @ansor_strategy_
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

// User errors: one line naming the pass and the IR it failed on (the input file and the line of its
// module, or the output of an earlier pass), non-zero exit, no traceback. Chunks are processed alone.
// RUN: not ansor-opt %s --split-input-file --ansor-extract-tasks 2>&1 | FileCheck %s --check-prefix=PARSE
// RUN: not ansor-opt %s --split-input-file --ansor-apply-best="log=%t.missing" 2>&1 | FileCheck %s --check-prefix=PASS1
// RUN: not ansor-opt %s --split-input-file --ansor-extract-tasks --ansor-apply-best="log=%t.missing" 2>&1 | FileCheck %s --check-prefix=PASS2
// RUN: not ansor-opt %s --split-input-file --ansor-emit-tuning-spec="log=%S/Inputs/mm64_log.jsonl" --ansor-extract-tasks 2>&1 | FileCheck %s --check-prefix=SPEC

// PARSE: ansor-opt: error: {{.*}}errors.mlir: not valid MLIR: line 23:40: expected '>' in tensor type
// PARSE-NOT: Traceback
// PASS1: ansor-opt: error: ansor-apply-best: {{.*}}errors.mlir:15: tuning log {{.*}}.missing does not exist: run --ansor-tune with log={{.*}}.missing first
// PASS1-NEXT: ansor-opt: error: {{.*}}errors.mlir: not valid MLIR: line 23:40
// PASS2: ansor-opt: error: ansor-apply-best: output of pass 1 (ansor-extract-tasks): tuning log {{.*}}.missing does not exist
// SPEC: ansor-opt: error: ansor-extract-tasks: output of pass 1 (ansor-emit-tuning-spec): no func.func to tune

func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.mulf %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @g(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %a, %a : tensor<4xf32
  return %0 : tensor<4xf32>
}

// An ONNX model is an input like any MLIR file: imported to linalg with its weights as parameters of
// scope "model" (written beside it, or to --params-out), never as constants in the IR.
// REQUIRES: onnx
// RUN: %python %S/Inputs/linear_relu_onnx.py %t.onnx
// RUN: ansor-opt %t.onnx --params-out %t.irpa | FileCheck %s --check-prefix=LINALG
// RUN: ansor-opt %t.onnx --params-out %t.irpa --ansor-extract-tasks | FileCheck %s --check-prefix=TASKS
// RUN: ansor-opt %t.onnx --params-out %t.irpa --ansor-extract-tasks --ansor-generate-sketches | FileCheck %s --check-prefix=TASKS
// RUN: ansor-opt %t.onnx --params-out %t.irpa -o %t.mlir && ansor-opt %t.mlir --ansor-extract-tasks | FileCheck %s --check-prefix=TASKS
// RUN: printf 'junk' > %t.bad.onnx
// RUN: not ansor-opt %t.bad.onnx --ansor-extract-tasks 2>&1 | FileCheck %s --check-prefix=BAD

// LINALG:      util.global private @[[W:.*]] {{.*}}= #flow.parameter.named<"model"::"[[W]]"> : tensor<16x8xf32>
// LINALG:      util.global private @[[B:.*]] {{.*}}= #flow.parameter.named<"model"::"[[B]]"> : tensor<16xf32>
// LINALG-NOT:  dense_resource
// LINALG:      func.func @linear_relu(%{{.*}}: tensor<4x8xf32>) -> tensor<4x16xf32>
// LINALG:        util.global.load immutable @[[W]] : tensor<16x8xf32>
// LINALG:        linalg.matmul
// LINALG-NOT:  dialect_resources

// The weights are arguments of the task (its key does not depend on their values).
// TASKS:       "ansor.task"()
// TASKS:       func.func @task(%{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<16x8xf32>, %{{.*}}: tensor<16xf32>) -> tensor<4x16xf32>
// TASKS:       name = "linear_relu_dispatch_0"
// TASKS-SAME:  root = "linalg.matmul"

// BAD: ansor-opt: error: {{.*}}bad.onnx: not an ONNX model (DecodeError: {{.*}}): give a .onnx file saved by onnx.save or torch.onnx.export

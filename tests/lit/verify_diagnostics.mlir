// Error behaviour stated in the input: each chunk is processed alone and must produce exactly the
// diagnostics its expected-error comments name, at the lines they name (here, one error each).
// RUN: ansor-opt %s --split-input-file --verify-diagnostics --ansor-extract-tasks
// An expectation that is not met, or a diagnostic nobody expected, fails the run:
// RUN: not ansor-opt %s --verify-diagnostics --ansor-extract-tasks 2>&1 | FileCheck %s --check-prefix=UNMET

// UNMET: verify_diagnostics.mlir:18: error: expected error "function dynamic has dynamic shapes" at line 19 was not produced
// UNMET-NOT: error: unexpected

func.func @syntax(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected '>' in tensor type}}
  %0 = arith.addf %a, %a : tensor<4xf32
  return %0 : tensor<4xf32>
}

// -----

// expected-error @below {{function dynamic has dynamic shapes}}
func.func @dynamic(%a: tensor<?xf32>) -> tensor<?xf32> {
  return %a : tensor<?xf32>
}

// -----

// expected-error @below {{operation 'foo.bar' of an unregistered dialect}}
"foo.bar"() : () -> ()

// -----

// An ansor op is checked against the dialect's IRDL definition.
// expected-error @below {{'"X"' does not satisfy the constraint}}
%knob = "ansor.knob"() {dim = 0 : i64, extent = 64 : i64, kind = "X", levels = ["distribution"], name = "d0", padded = false} : () -> !transform.any_param

// -----

// expected-error-re @below {{ansor-extract-tasks: {{.*}}verify_diagnostics.mlir:{{[0-9]+}}: no func.func to tune}}
module {
}

// -----

// Tasks read from ansor IR are compiled from their functions, named after the task.
// expected-error @below {{function t has dynamic shapes}}
"ansor.task"() ({
  builtin.module {
    func.func @task(%a: tensor<?xf32>) -> tensor<?xf32> {
      return %a : tensor<?xf32>
    }
  }
  transform.yield
}) {flops = 4 : i64, iterator_types = ["parallel"], key = "0", loop_extents = array<i64: 4>, name = "t", pipeline = "none", root = "linalg.generic", root_index = 0 : i64, weight = 1 : i64} : () -> ()

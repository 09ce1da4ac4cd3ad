// Row sums (long inner reduction, no reuse): the rfactor sketch keeps partial sums in a vector.
// RUN: ansor-opt %s --ansor-print-strategy="rule=rfactor seed=1" | FileCheck %s

// CHECK: transform.named_sequence @ansor_strategy_{{.*}}(%{{.*}}: !transform.any_op {transform.readonly}) attributes {ansor.decisions = {{{.*}}}, ansor.rules = ["td-multi-level-tiling", "rfactor"], ansor.sketch = {{[0-9]+}} : i64, ansor.task = "{{.*}}"}
// CHECK: transform.structured.tile_using_forall
// CHECK: transform.structured.tile_reduction_using_for
// CHECK: transform.apply_patterns.vector.multi_reduction_unrolling
func.func @rows(%x: tensor<64x512xf32>) -> tensor<64xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<64xf32>) -> tensor<64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<64x512xf32>) outs(%f : tensor<64xf32>) {
    ^bb0(%a: f32, %o: f32):
      %s = arith.addf %a, %o : f32
      linalg.yield %s : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}

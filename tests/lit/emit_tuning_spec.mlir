// One linked tuning spec for ordinary IREE flows; IREE applies it to the dispatch.
// RUN: ansor-opt %s --ansor-emit-tuning-spec="log=%S/Inputs/mm64_log.jsonl" -o %t.spec.mlir 2>/dev/null
// RUN: FileCheck %s < %t.spec.mlir
// RUN: iree-compile %s --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu --iree-llvmcpu-target-cpu=host --iree-codegen-tuning-spec-path=%t.spec.mlir --compile-to=executable-configurations | FileCheck %s --check-prefix=IREE

// CHECK: #[[CONFIG:.+]] = #iree_cpu.lowering_config<distribution = [32, 64, 0]
// CHECK: #[[INFO:.+]] = #iree_codegen.compilation_info<lowering_config = #[[CONFIG]]
// CHECK: transform.named_sequence @ansor_match_373b436019a0287f(%{{[a-z0-9_]+}}: !transform.any_op {transform.readonly})
// CHECK: transform.iree.match.cast_compatible_dag_from_root
// CHECK: transform.param.constant #[[INFO]]
// CHECK: transform.named_sequence @__kernel_config
// CHECK-SAME: attributes {iree_codegen.tuning_spec_entrypoint}
// CHECK: @ansor_match_373b436019a0287f -> @ansor_apply_op_config
// IREE: lowering_config = #iree_cpu.lowering_config<distribution = [32, 64, 0], vector_common_parallel = [4, 16, 0], vector_reduction = [0, 0, 4]>
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

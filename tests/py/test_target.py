"""Targets are what IREE resolves them to: CPU name, features and limits read off IREE's executable target.

Compile-only and pinned to named CPUs, so they hold on any x86-64 host: an
AVX2 CPU (znver3) and two AVX-512 ones (znver4, sapphirerapids).
"""

from __future__ import annotations

import pytest

from ansor_mlir.core.target import Target, enabled_features
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.target_resolution import resolve_cpu, resolve_target
from ansor_mlir.mlir.iree_compiler import run_tool

# A matmul whose register tile (a 64x128 f32 accumulator, 32 KiB) is past IREE's vector-size limit on every x86 CPU.
LARGE_VECTORS = """func.func @mm(%a: tensor<64x32xf32>, %b: tensor<32x128xf32>) -> tensor<64x128xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x128xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<64x128xf32>) -> tensor<64x128xf32>
  %r = linalg.matmul {compilation_info = #iree_codegen.compilation_info<
      lowering_config = #iree_cpu.lowering_config<distribution = [64, 128, 0],
          vector_common_parallel = [64, 128, 0], vector_reduction = [0, 0, 1]>,
      translation_info = #iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<DoubleTilingExpert>>>}
      ins(%a, %b : tensor<64x32xf32>, tensor<32x128xf32>) outs(%f : tensor<64x128xf32>) -> tensor<64x128xf32>
  return %r : tensor<64x128xf32>
}
"""

NAMED = [
    # cpu, vector bytes, vector registers, IREE's vector-size limit
    ("znver3", 32, 16, 16384),
    ("znver4", 64, 32, 32768),
    ("sapphirerapids", 64, 32, 32768),
]


@pytest.mark.parametrize(("cpu", "vector_bytes", "registers", "vector_limit"), NAMED)
def test_named_cpu_resolves_to_what_iree_targets(cpu, vector_bytes, registers, vector_limit):
    target = resolve_target(Target(cpu=cpu, threads=2))
    assert target.resolved_cpu == cpu
    assert target.vector_bytes == vector_bytes
    assert target.vector_registers == registers
    assert target.vector_limit_bytes == vector_limit
    assert target.stack_limit_bytes == 32 * 1024
    assert {"avx2", "fma"} <= set(target.cpu_features)
    assert ("avx512f" in target.cpu_features) == (registers == 32)
    assert target.key == f"llvm-cpu:{cpu}:t2"
    assert target.fingerprint.startswith(f"llvm-cpu:{cpu}:") and target.fingerprint.endswith(":t2")


@pytest.mark.parametrize("cpu", ["znver3", "znver4"])
def test_vector_limit_is_the_one_iree_enforces(cpu):
    target = resolve_target(Target(cpu=cpu))
    result = run_tool("iree-compile", [*target.compile_flags(), "-", "-o", "/dev/null"], stdin=LARGE_VECTORS.encode())
    assert not result.ok
    assert f"large vector sizes ({target.vector_limit_bytes} bytes)" in result.stderr


def test_host_resolves_to_a_named_cpu_and_keeps_its_record_key():
    target = resolve_target(Target(cpu="host"))
    assert target.resolved_cpu not in ("", "host")
    assert target.cpu_features and target.vector_bytes in (16, 32, 64)
    assert target.key == "llvm-cpu:host:t1"
    assert target.fingerprint.startswith(f"llvm-cpu:{target.resolved_cpu}:")


def test_fingerprint_tells_cpus_and_thread_counts_apart():
    zen3, zen4 = (resolve_target(Target(cpu=cpu)) for cpu in ("znver3", "znver4"))
    assert zen3.fingerprint != zen4.fingerprint
    assert zen3.fingerprint != resolve_target(Target(cpu="znver3", threads=4)).fingerprint
    assert zen3.fingerprint == resolve_target(Target(cpu="znver3")).fingerprint


def test_resolution_is_asked_once_per_process():
    first = resolve_cpu("llvm-cpu", "znver3", "")
    hits = resolve_cpu.cache_info().hits
    assert resolve_cpu("llvm-cpu", "znver3", "") is first
    assert resolve_cpu.cache_info().hits == hits + 1


def test_unknown_cpu_is_a_clear_error():
    with pytest.raises(AnsorError, match=r"cpu=notacpu: IREE cannot target it .*use cpu=host"):
        resolve_cpu("llvm-cpu", "notacpu", "")


def test_enabled_features_let_later_entries_win():
    assert enabled_features("+avx2,+fma,-avx512f,+sse4.2,-fma,+avx2") == ("avx2", "sse4.2")


def test_unresolved_targets_derive_registers_from_vector_width():
    assert Target(vector_bytes=64).vector_registers == 32
    assert Target(vector_bytes=32).vector_registers == 16


def test_ansor_builds_reassociate_fp_reductions_and_iree_default_builds_do_not():
    """Every CPU program ansor-mlir builds reassociates its floating-point reductions; the build a benchmark calls
    IREE's default selects the target and nothing else. A CUDA target gets no CPU codegen flag."""
    from ansor_mlir.core.gpu_target import parse_gpu
    from ansor_mlir.core.target import REASSOCIATE_FP_REDUCTIONS_FLAG

    cpu = Target(cpu="znver3", threads=2)
    assert REASSOCIATE_FP_REDUCTIONS_FLAG in cpu.compile_flags()
    assert REASSOCIATE_FP_REDUCTIONS_FLAG not in cpu.iree_default_flags()
    assert cpu.compile_flags() == [*cpu.iree_default_flags(), *cpu.codegen_flags()]
    cuda = Target(backend="cuda", gpu=parse_gpu("sm_80"))
    assert cuda.codegen_flags() == [] and cuda.compile_flags() == cuda.iree_default_flags()

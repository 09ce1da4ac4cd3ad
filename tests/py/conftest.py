"""Shared fixtures: small real modules (the real IREE compiles them)."""

from __future__ import annotations

import numpy as np
import pytest

from ansor_mlir.core.target import Target, detect_host
from ansor_mlir.frontend.target_resolution import resolve_target

# Compile-only tests pin named CPUs, an AVX2 one and an AVX-512 one, so they hold on any x86-64 host;
# tests that run code use the host (`target`) and assert behaviour, not lane counts.
AVX2_CPU, AVX512_CPU = "znver3", "znver4"
PINNED_CPUS = (AVX2_CPU, AVX512_CPU)


# A test that compares measured times on a shared 2-core host is marked `timing`: the host's phases can flip a
# comparison that holds by a wide margin otherwise, so a failure is retried twice before it counts (a real
# regression fails all three runs).
TIMING_RERUNS = 2


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", f"timing: compares measured times; rerun {TIMING_RERUNS}x on failure")


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        if item.get_closest_marker("timing"):
            item.add_marker(pytest.mark.flaky(reruns=TIMING_RERUNS))


def pinned_target(cpu: str, threads: int = 1) -> Target:
    """A named CPU as IREE resolves it, on any host."""
    return resolve_target(Target(cpu=cpu, threads=threads))


def assert_builds_match_reference(target: Target, items: list, workload) -> None:
    """Build `items` for the host, run each once and compare its output with the workload's numpy reference."""
    from ansor_mlir.measure.compare import run_once
    from ansor_mlir.measure.local_builder import LocalBuilder

    inputs = workload.inputs()
    (expected,) = workload.reference(inputs)
    for build in LocalBuilder(target, workers=1, timeout_s=120).build(items):
        assert build.ok, f"{build.error.value} {build.message}"
        (got,) = run_once(build.program.vmfb, workload.func_name, inputs)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def assert_candidate_matches(target: Target, mlir: str, function: str, task, sketch, values: dict,
                             inputs: list[np.ndarray], expected: np.ndarray) -> None:
    """Build one candidate of `sketch` (its knob `values`) for the host, run it once on `inputs` and compare its
    output with `expected`."""
    from ansor_mlir.core.schedule import Candidate
    from ansor_mlir.measure.compare import run_once
    from ansor_mlir.measure.local_builder import LocalBuilder
    from ansor_mlir.mlir.iree_compiler import compile_to_phase
    from ansor_mlir.tuning.tuner import build_input

    candidate = Candidate(task.key, sketch.index, tuple(sorted(values.items())))
    flow = compile_to_phase(mlir, target.compile_flags(), "flow", function)
    (build,) = LocalBuilder(target, workers=1, timeout_s=120).build([build_input(task, sketch, candidate, flow)])
    assert build.ok, f"{build.error.value} {build.message}"
    (got,) = run_once(build.program.vmfb, function, inputs)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def matmul_bias_relu(m: int, n: int, k: int, name: str = "mm", transpose_b: bool = False) -> str:
    """`relu(a @ b + bias)`; with `transpose_b`, `b` is stored `[n, k]` (a linear layer's weight, `a @ b^T`)."""
    if transpose_b:
        b_type = f"tensor<{n}x{k}xf32>"
        contraction = f"""linalg.generic {{indexing_maps = [affine_map<(i, j, l) -> (i, l)>,
                                         affine_map<(i, j, l) -> (j, l)>,
                                         affine_map<(i, j, l) -> (i, j)>],
                        iterator_types = ["parallel", "parallel", "reduction"]}}
      ins(%a, %b : tensor<{m}x{k}xf32>, {b_type}) outs(%f : tensor<{m}x{n}xf32>) {{
    ^bb0(%p: f32, %q: f32, %acc: f32):
      %t = arith.mulf %p, %q : f32
      %u = arith.addf %acc, %t : f32
      linalg.yield %u : f32
  }} -> tensor<{m}x{n}xf32>"""
    else:
        b_type = f"tensor<{k}x{n}xf32>"
        contraction = f"""linalg.matmul ins(%a, %b : tensor<{m}x{k}xf32>, {b_type})
      outs(%f : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>"""
    return f"""
func.func @{name}(%a: tensor<{m}x{k}xf32>, %b: {b_type}, %bias: tensor<{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %mm = {contraction}
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%mm, %bias : tensor<{m}x{n}xf32>, tensor<{n}xf32>) outs(%e : tensor<{m}x{n}xf32>) {{
    ^bb0(%x: f32, %y: f32, %o: f32):
      %s = arith.addf %x, %y : f32
      %z = arith.maximumf %s, %cst : f32
      linalg.yield %z : f32
  }} -> tensor<{m}x{n}xf32>
  return %r : tensor<{m}x{n}xf32>
}}
"""

@pytest.fixture(scope="session")
def target():
    return resolve_target(detect_host())


@pytest.fixture(scope="session")
def small_mm() -> str:
    return matmul_bias_relu(128, 128, 128)


@pytest.fixture(scope="session")
def small_task(small_mm, target):
    from ansor_mlir.frontend.task_extraction import extract_tasks

    tasks = extract_tasks(small_mm, target, "small_mm")
    assert len(tasks) == 1
    return tasks[0]

"""Packed layout: a contraction read across its vector loop (`x @ W^T`) is packed, builds, runs and matches numpy."""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import assert_candidate_matches, matmul_bias_relu, pinned_target

from ansor_bench.workloads import make_workload
from ansor_mlir.codegen.transform_strategy import render_strategy, strategy_name
from ansor_mlir.codegen.tuning_spec import attach_configs
from ansor_mlir.core.schedule import Candidate, MicroKernel, Pack, micro_kernel_shape
from ansor_mlir.core.task import main_task
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.kernel_asm import dump_assembly, loop_reports
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.space.annotation import is_valid, sample_candidate
from ansor_mlir.space.dag import task_dag
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.tuner import task_module

M, N, K = 32, 64, 96


def linear_bias_relu(m: int, n: int, k: int) -> str:
    """A linear layer: `relu(x @ W^T + b)` with `W` stored `[out, in]`, as PyTorch keeps it."""
    return matmul_bias_relu(m, n, k, name="linear", transpose_b=True)


@pytest.fixture(scope="module")
def packing(target):
    mlir = linear_bias_relu(M, N, K)
    task = main_task(extract_tasks(mlir, target, "linear"))
    sketch = next(s for s in generate_sketches(task, target) if s.has(Pack))
    return mlir, task, sketch


def test_packing_only_where_an_input_is_read_across_the_vector_loop(target, packing):
    _, task, sketch = packing
    assert task_dag(task).packed_operands() == (1,)
    assert "consumer_fusion" not in {k.name for k in sketch.knobs}
    plain = main_task(extract_tasks(matmul_bias_relu(M, N, K), target, "mm"))
    assert not any(s.has(Pack) for s in generate_sketches(plain, target))
    conv = main_task(extract_tasks(make_workload("C2D", (1, 14, 14, 3, 16, 3, 2, 1)).mlir, target, "C2D"))
    assert not any(s.has(Pack) for s in generate_sketches(conv, target))
    tbs = main_task(extract_tasks(make_workload("TBS", (1, 16, 2, 16)).mlir, target, "TBS"))
    assert any(s.has(Pack) for s in generate_sketches(tbs, target))


def values(k_cache: int) -> dict[str, tuple[int, ...]]:
    """Workgroups of 32x64, a 32x32 cache tile over `k_cache` of K, 4x16 register tiles (their accumulators fit
    the register file of any AVX2 or AVX-512 host)."""
    return {"d0": (32, 32, 4), "d1": (64, 32, 16), "d2": (k_cache, 1), "cache_write": (0,), "lowering": (0,)}


def test_packed_strategy_packs_the_transposed_operand(target, packing):
    _, task, sketch = packing
    candidate = Candidate(task.key, sketch.index, tuple(sorted(values(32).items())))
    text = render_strategy(sketch, candidate, task, "s")
    register_columns = values(32)["d1"][-1]
    assert "transform.structured.pack %" in text and f"packed_sizes = [0, {register_columns}, 0]" in text
    assert "get_producer_of_operand" in text and "lower_unpack" in text
    assert "fold_unit_extent_dims_via_slices" not in text


def test_panels_over_the_stack_limit_are_rejected(target):
    """IREE's stack is 32 KiB: a 32x64 output tile (8 KiB, the epilogue runs after the root) plus a
    64x64 panel of `W` (16 KiB) fit; a 64x1024 panel (256 KiB) or a 64x128 one (32 KiB) does not."""
    task = main_task(extract_tasks(linear_bias_relu(64, 64, 1024), target, "linear"))
    sketch = next(s for s in generate_sketches(task, target) if s.has(Pack))
    good = {"d0": (32, 32, 4), "d1": (64, 64, 16), "d2": (64, 1), "cache_write": (0,), "lowering": (0,)}
    assert is_valid(sketch, good, task, target)
    assert not is_valid(sketch, {**good, "d2": (128, 1)}, task, target)
    assert not is_valid(sketch, {**good, "d2": (1024, 1)}, task, target)


@pytest.mark.parametrize("k_cache", [K, 32])
def test_packed_candidates_compile_run_and_match_numpy(target, packing, k_cache):
    mlir, task, sketch = packing
    assert is_valid(sketch, values(k_cache), task, target)
    assert_linear_matches_numpy(target, mlir, task, sketch, values(k_cache), seed=0)


def assert_linear_matches_numpy(target, mlir: str, task, sketch, values: dict, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, w, bias = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((M, K), (N, K), (N,)))
    assert_candidate_matches(target, mlir, "linear", task, sketch, values, [x, w, bias], np.maximum(x @ w.T + bias, 0))


def test_sampled_packed_candidates_are_valid_and_deterministic(target, packing):
    _, task, sketch = packing
    first = [sample_candidate(sketch, task, target, random.Random(s)) for s in range(8)]
    assert first == [sample_candidate(sketch, task, target, random.Random(s)) for s in range(8)]
    assert all(c is not None and is_valid(sketch, dict(c.values), task, target) for c in first)


@pytest.fixture(scope="module")
def packed_micro_kernel(target):
    mlir = linear_bias_relu(M, N, K)
    task = main_task(extract_tasks(mlir, target, "linear"))
    sketch = next(s for s in generate_sketches(task, target) if s.has(Pack) and s.has(MicroKernel))
    return mlir, task, sketch


def micro_kernel_values(sketch) -> dict[str, tuple[int, ...]]:
    """One workgroup of all 32 rows, 16-row cache tiles (two per panel), register tiles 16 columns wide with the
    fewest rows the CPU offers (4x16 with AVX2, 16x16 with AVX-512)."""
    (shapes,) = [k.options for k in sketch.knobs if k.name == "micro_kernel"]
    narrow = min((s for s in shapes if micro_kernel_shape(s)[1] == 16), key=lambda s: micro_kernel_shape(s)[0])
    return {"d0": (32, 16), "d1": (64, 16), "d2": (32, 1), "micro_kernel": (shapes.index(narrow),)}


def test_packed_micro_kernel_packs_each_panel_once_per_row_block(target, packed_micro_kernel):
    """GotoBLAS' loop order: the `[kc, nc]` panel of `W` is packed above the loop over row tiles, not in it
    (repacked for each 16-row tile it cost TBS as many instructions as its micro-kernel)."""
    _, task, sketch = packed_micro_kernel
    assert "consumer_fusion" not in {k.name for k in sketch.knobs}
    values = micro_kernel_values(sketch)
    assert is_valid(sketch, values, task, target)
    text = render_strategy(sketch, Candidate(task.key, sketch.index, tuple(sorted(values.items()))), task, "s")
    packed_at = text.index("transform.structured.pack %")
    row_tiles = text.index("tile_using_for %packed_any tile_sizes [16, 0, 0, 0]")
    assert packed_at < row_tiles
    assert "tile_sizes [0, 16, 0]" in text and "tile_sizes [16, 16, 0]" not in text  # no rows cut before it


def test_packed_micro_kernel_with_consumers_matches_numpy(target, packed_micro_kernel):
    mlir, task, sketch = packed_micro_kernel
    assert_linear_matches_numpy(target, mlir, task, sketch, micro_kernel_values(sketch), seed=1)


@pytest.mark.parametrize("cpu", ["znver3", "sapphirerapids"])
def test_transposed_panels_are_packed_in_shuffle_lane_blocks_without_spills(cpu, tmp_path):
    """The transposed panel is cut into `Target.transpose_block` blocks (4x4 f32, in-lane shuffles). One block
    of `nr` columns (16x16 here) took index-vector permutes and spilled (TBS's 32x32: 225 spill stores per
    block, 15% of its call). Compile-only, on a pinned AVX2 CPU and a pinned AVX-512 CPU."""
    target = pinned_target(cpu)
    task = main_task(extract_tasks(linear_bias_relu(M, N, K), target, "linear"))
    sketch = next(s for s in generate_sketches(task, target) if s.has(Pack) and s.has(MicroKernel))
    assert sketch.step(Pack) == Pack(block=target.transpose_block(4)) and target.transpose_block(4) == 4
    candidate = Candidate(task.key, sketch.index, tuple(sorted(micro_kernel_values(sketch).items())))
    name = strategy_name(task, candidate)
    flow = compile_to_phase(task_module(task), target.compile_flags(), "flow", task.name)
    module = attach_configs(flow, {}, task.name, {task.key: (name, render_strategy(sketch, candidate, task, name))})[0]
    loops = [loop for path in dump_assembly(module, tmp_path) for loop in loop_reports(path.read_text())]
    assert any(loop.is_micro_kernel for loop in loops)
    assert not [loop.label for loop in loops if loop.spills], "a loop of the packed kernel spills"


# A row reduction with its rows in vectors (a layer norm's sum of squares, BERT's 128x768): the input is read
# across the vector loop, so the packing sketch applies. With the rows' cache tile equal to their register tile,
# 10 of 14 sampled candidates failed to bufferize ("Yield operand #0 is not equivalent to the corresponding iter
# bbArg").
ROW_SUM = """
func.func @rows(%x: tensor<64x256xf32>) -> tensor<64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64xf32>) -> tensor<64xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<64x256xf32>) outs(%f : tensor<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %sum = arith.addf %acc, %sq : f32
    linalg.yield %sum : f32
  } -> tensor<64xf32>
  return %s : tensor<64xf32>
}
"""


def test_packed_row_reduction_keeps_a_row_loop_above_its_registers_and_matches_numpy(target):
    from ansor_mlir.measure.compare import run_once
    from ansor_mlir.measure.local_builder import LocalBuilder
    from ansor_mlir.space.resolve import resolve
    from ansor_mlir.tuning.tuner import build_input

    task = main_task(extract_tasks(ROW_SUM, target, "rows"))
    sketch = next(s for s in generate_sketches(task, target) if s.has(Pack))
    rng = random.Random(0)
    candidates = [c for c in (sample_candidate(sketch, task, target, rng) for _ in range(6)) if c is not None]
    assert candidates
    for c in candidates:
        resolved = resolve(sketch, c, task)
        assert resolved.per_level["cache_parallel"][0] > resolved.register[0]
    lanes = target.vector_lanes(4)
    equal = {**dict(candidates[0].values), "d0": (64, lanes, lanes)}
    assert not is_valid(sketch, equal, task, target)
    flow = compile_to_phase(ROW_SUM, target.compile_flags(), "flow", "rows")
    x = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
    for c, build in zip(candidates, LocalBuilder(target, workers=2, timeout_s=120).build(
            [build_input(task, sketch, c, flow) for c in candidates]), strict=True):
        assert build.ok, f"{dict(c.values)}: {build.error.value} {build.message}"
        (got,) = run_once(build.program.vmfb, "rows", [x])
        np.testing.assert_allclose(got, (x * x).sum(1), rtol=1e-4, err_msg=str(dict(c.values)))

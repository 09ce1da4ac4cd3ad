"""Padded register tiles: the padding sketch builds, runs and matches numpy where tiles do not divide loops.

Validity checks pin the AVX-512 CPU (16 lanes) the hand-picked tiles are for; the run uses the host.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import AVX512_CPU, PINNED_CPUS, assert_candidate_matches, matmul_bias_relu, pinned_target

from ansor_bench.workloads import make_workload
from ansor_mlir.core.schedule import Pad, TileKnob
from ansor_mlir.core.task import main_task
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.space.annotation import is_valid, padded_register_options, sample_candidate
from ansor_mlir.space.sketch_rules import generate_sketches

# 40 columns are not a whole number of 16-lane vectors, 20 rows have no divisor in 3..8 but 4, 5.
M, N, K = 20, 40, 36
# The run: 36 columns are not a whole number of vectors on any AVX2 or AVX-512 host (8 or 16 lanes).
RUN_N = 36


def padding_sketch(mlir: str, target):
    task = main_task(extract_tasks(mlir, target, "mm"))
    return mlir, task, next(s for s in generate_sketches(task, target) if s.has(Pad))


@pytest.fixture(scope="module")
def avx512():
    return pinned_target(AVX512_CPU)


@pytest.fixture(scope="module")
def padded(avx512):
    return padding_sketch(matmul_bias_relu(M, N, K), avx512)


def test_padding_sketch_only_where_divisors_are_poor(avx512, padded):
    target = avx512
    _, _, sketch = padded
    assert all(k.padded for k in sketch.knobs if isinstance(k, TileKnob) and k.name.startswith("d"))
    even = main_task(extract_tasks(matmul_bias_relu(64, 64, 64), target, "mm"))
    assert not any(s.has(Pad) for s in generate_sketches(even, target))
    assert not any(k.padded for s in generate_sketches(even, target) for k in s.knobs if isinstance(k, TileKnob))


def test_padded_register_options_add_whole_vectors_and_small_tiles():
    assert padded_register_options(109, 16) == (1, 16, 32, 48, 64, 80, 96, 109, 112)
    assert padded_register_options(20, 1) == (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 20)


def test_padded_operand_tile_with_an_interior_unit_dim_is_rejected(avx512, padded):
    """A 4x32 tile one deep pads A to tensor<4x1xf32>: the write folding drops all but one row."""
    _, task, sketch = padded
    target = avx512
    good = {"d0": (20, 8), "d1": (40, 32), "d2": (12,), "cache_write": (0,), "lowering": (0,), "consumer_fusion": (1,)}
    assert is_valid(sketch, good, task, target)
    assert not is_valid(sketch, {**good, "d2": (1,)}, task, target)


def test_padded_tiles_round_up_whole_vectors_only(avx512, padded):
    _, task, sketch = padded
    target = avx512
    good = {"d0": (20, 8), "d1": (40, 32), "d2": (12,), "cache_write": (0,), "lowering": (0,), "consumer_fusion": (1,)}
    assert is_valid(sketch, {**good, "d1": (40, 48), "d2": (4,)}, task, target)
    assert not is_valid(sketch, {**good, "d1": (8, 16)}, task, target)
    assert not is_valid(sketch, {**good, "consumer_fusion": (0,)}, task, target)


@pytest.mark.parametrize("cpu", PINNED_CPUS)
def test_padded_panels_over_the_stack_limit_are_rejected(cpu):
    """GMM 109^3, a 1x80 register tile: B's padded 109x80 panel (34 KiB) exceeded IREE's 32 KiB stack."""
    target = pinned_target(cpu)
    task = main_task(extract_tasks(make_workload("GMM", (1, 109, 109, 109)).mlir, target, "GMM"))
    sketch = next(s for s in generate_sketches(task, target) if s.has(Pad))
    good = {"cache_write": (0,), "d1": (1, 1), "d2": (109, 32), "d3": (1,), "lowering": (0,)}
    assert is_valid(sketch, good, task, target)
    assert not is_valid(sketch, {**good, "d2": (109, 80)}, task, target)


@pytest.mark.parametrize("cache_write", [0, 1])
def test_non_divisor_tiles_compile_run_and_match_numpy(target, cache_write):
    """On the host: a 6-row register tile of two vectors (6x16 on AVX2), dividing neither 20 rows nor 36 columns."""
    mlir, task, sketch = padding_sketch(matmul_bias_relu(M, RUN_N, K), target)
    lanes = target.vector_lanes(4)
    assert RUN_N % (2 * lanes)
    values = {"d0": (20, 6), "d1": (RUN_N, 2 * lanes), "d2": (12,), "cache_write": (cache_write,), "lowering": (0,),
              "consumer_fusion": (1,)}
    assert is_valid(sketch, values, task, target)
    rng = np.random.default_rng(0)
    a, b, bias = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((M, K), (K, RUN_N), (RUN_N,)))
    assert_candidate_matches(target, mlir, "mm", task, sketch, values, [a, b, bias], np.maximum(a @ b + bias, 0))


@pytest.mark.parametrize("cpu", PINNED_CPUS)
def test_sampled_padded_candidates_are_valid_and_deterministic(cpu):
    target = pinned_target(cpu)
    _, task, sketch = padding_sketch(matmul_bias_relu(M, RUN_N, K), target)
    first = [sample_candidate(sketch, task, target, random.Random(s)) for s in range(8)]
    assert first == [sample_candidate(sketch, task, target, random.Random(s)) for s in range(8)]
    assert all(c is not None and is_valid(sketch, dict(c.values), task, target) for c in first)
    assert any(RUN_N % dict(c.values)["d1"][-1] for c in first)

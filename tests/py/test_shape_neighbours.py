"""The best measured micro-kernel is measured again with each other register shape (compile-free)."""

from __future__ import annotations

import random

import pytest
from conftest import AVX2_CPU, AVX512_CPU, pinned_target

from ansor_bench.workloads import make_workload
from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.schedule import Candidate, Family, MicroKernel, micro_kernel_shape
from ansor_mlir.core.task import main_task
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.search.evolutionary_search import EvolutionarySearch, EvolutionParams
from ansor_mlir.search.shape_neighbours import distance, divisor_chains, fitted, shape_neighbours
from ansor_mlir.space.annotation import is_valid, sample_candidate
from ansor_mlir.space.resolve import resolve
from ansor_mlir.space.sketch_rules import generate_sketches


def tbs(cpu: str):
    """The suite's attention scores (a contraction whose B operand is packed), its transform micro-kernel sketch."""
    target = pinned_target(cpu)
    task = main_task(extract_tasks(make_workload("TBS", (1, 128, 12, 64)).mlir, target, "TBS"))
    sketch = next(s for s in generate_sketches(task, target) if s.family is Family.TRANSFORM and s.has(MicroKernel))
    return target, task, sketch


def test_divisor_chains_are_every_value_of_a_knob():
    target, task, sketch = tbs(AVX2_CPU)
    knob = next(k for k in sketch.knobs if getattr(k, "levels", None) and len(k.levels) == 2)
    chains = divisor_chains(knob)
    assert len(chains) == len(set(chains))
    assert all(knob.outer_bound % c[0] == 0 and c[0] % c[1] == 0 for c in chains)
    assert distance((64, 8), (64, 1)) == 3 and distance((64, 8), (64, 8)) == 0


@pytest.mark.parametrize("cpu", [AVX2_CPU, AVX512_CPU])
def test_each_other_shape_keeps_the_tiles_that_fit_it(cpu):
    """TBS on Zen 3: the search kept 8x8 (382 us) where the same tiles with 6x16 registers ran 327 us. Every
    neighbour is valid, has another shape, and changes no more than two tile knobs, the nearest that fit."""
    target, task, sketch = tbs(cpu)
    (knob,) = sketch.step(MicroKernel).knobs
    for seed in range(6):
        best = sample_candidate(sketch, task, target, random.Random(seed))
        neighbours = shape_neighbours(best, sketch, task, target)
        shapes = [n.choice(knob) for n in neighbours]
        assert best.choice(knob) not in shapes and len(set(shapes)) == len(shapes)
        assert len(neighbours) >= len(knob.options) - 2  # a shape may fit no tiling near these
        for n in neighbours:
            values = dict(n.values)
            assert is_valid(sketch, values, task, target)
            changed = [k for k, v in values.items() if k != knob.name and v != dict(best.values)[k]]
            assert len(changed) <= 2
            _, nr = micro_kernel_shape(n.choice(knob))
            assert resolve(sketch, n, task).register[sketch.step(MicroKernel).cols] == nr


def test_a_fitting_candidate_is_kept_and_a_tight_shape_gets_its_reduction_unroll_removed():
    """Zen 3's TBS: 8x8 with k unrolled 8 becomes 4x16 unchanged and 6x16 (tight: k unrolled 1) with only
    its reduction's register tile changed."""
    target, task, sketch = tbs(AVX2_CPU)
    (knob,) = sketch.step(MicroKernel).knobs
    assert {"8x8", "4x16", "6x16"} <= set(knob.options)
    shape = (knob.options.index("8x8"),)
    values = {"d0": (4, 1), "d1": (128, 64), "d2": (64, 16), "d3": (64, 8), "micro_kernel": shape}
    assert is_valid(sketch, values, task, target)
    assert fitted(values, sketch, task, target) == values
    best = Candidate(task.key, sketch.index, tuple(sorted(values.items())))
    by_shape = {n.choice(knob): dict(n.values) for n in shape_neighbours(best, sketch, task, target)}
    assert by_shape["4x16"] == {**values, "micro_kernel": (knob.options.index("4x16"),)}
    assert by_shape["6x16"] == {**values, "micro_kernel": (knob.options.index("6x16"),), "d3": (64, 1)}


def test_the_search_measures_a_new_best_with_the_other_shapes_once():
    target, task, sketch = tbs(AVX2_CPU)
    sketches = generate_sketches(task, target)
    search = EvolutionarySearch(target, random.Random(0), params=EvolutionParams(population=64, generations=1))
    best = sample_candidate(sketch, task, target, random.Random(1))
    search.update(task, sketches, [(best, MeasureResult(ErrorKind.NONE, median_s=1e-4))])
    measured = {best.identity}
    batch = search.next_batch(task, sketches, measured, 16)
    expected = {n.identity for n in shape_neighbours(best, sketch, task, target)}
    assert expected and expected <= {c.identity for c in batch}
    again = search.next_batch(task, sketches, measured | {c.identity for c in batch}, 16)
    assert not expected & {c.identity for c in again}


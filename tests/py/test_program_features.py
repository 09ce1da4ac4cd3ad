"""Features of the resolved program: named fields, read from `space.resolve`, describing the target too."""

from __future__ import annotations

import math
import random

import pytest
from conftest import AVX2_CPU, AVX512_CPU, pinned_target

from ansor_bench.workloads import make_workload
from ansor_mlir.core.schedule import Candidate, Family
from ansor_mlir.core.task import main_task
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.model.program_features import NAMES, ProgramFeatures, program_features
from ansor_mlir.model.registry import EXTRACTORS, make_feature_extractor
from ansor_mlir.search.search_context import TaskContext
from ansor_mlir.space.annotation import is_valid, sample_candidate, sample_fresh
from ansor_mlir.space.limits import limits
from ansor_mlir.space.resolve import resolve
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.steps.checks import CheckContext, StackLimit


def lg(x: float) -> float:
    return math.log2(1 + x)


def gmm(target, m=64, n=64, k=64):
    task = main_task(extract_tasks(make_workload("GMM", (1, m, n, k)).mlir, target, "GMM"))
    return task, generate_sketches(task, target)


def test_every_candidate_has_every_named_feature_and_programs_differ(small_task, target):
    sketches = generate_sketches(small_task, target)
    by_index = {s.index: s for s in sketches}
    candidates = sample_fresh(sketches, small_task, target, random.Random(0), 40, set())
    candidates += [Candidate(small_task.key, s.index, ()) for s in sketches if not s.knobs]
    for c in candidates:
        assert tuple(program_features(small_task, by_index[c.sketch_index], c, target)) == NAMES
    matrix = ProgramFeatures().extract(small_task, by_index, candidates, target)
    assert matrix.values.shape == (len(candidates), len(NAMES)) and len(set(NAMES)) == len(NAMES)
    assert len({tuple(row) for row in matrix.values}) > 30
    expected = program_features(small_task, by_index[candidates[0].sketch_index], candidates[0], target)
    assert matrix.record(0) == pytest.approx(expected)


def test_register_tile_features_count_vector_fmas_loads_and_accumulators():
    """A 4x32 register tile of a matmul on 16-lane AVX-512: 8 vector FMAs per k step, 4 broadcasts of A and 2
    vector loads of B, 8 of 32 zmm registers holding accumulators."""
    target = pinned_target(AVX512_CPU)
    task, sketches = gmm(target)
    sketch = next(s for s in sketches if s.family is Family.TRANSFORM and s.knobs)
    rng = random.Random(0)
    for _ in range(200):
        c = sample_candidate(sketch, task, target, rng)
        reg = resolve(sketch, c, task).level_tiles()["reg"]
        if reg[1:] == (4, 32, 1):
            break
    else:
        pytest.skip("no 4x32x1 register tile sampled")
    f = program_features(task, sketch, c, target)
    assert f["vec_fma_per_step"] == pytest.approx(lg(8))
    assert f["vec_loads_per_step"] == pytest.approx(lg(4 + 2))
    assert f["vec_acc_reg_share"] == pytest.approx(8 / 32)
    assert f["reg_par_volume"] == pytest.approx(lg(128)) and f["reg_red_volume"] == 0.0 + lg(1)
    # A is broadcast along the vector loop, B read contiguously, the output written contiguously.
    assert (f["out_vec_contiguous"], f["out_vec_broadcast"]) == (1.0, 0.0)
    assert f["in0_vec_broadcast"] + f["in1_vec_broadcast"] == 1.0


def test_target_features_tell_cpus_apart():
    rows = {}
    for cpu in (AVX2_CPU, AVX512_CPU):
        target = pinned_target(cpu)
        task, sketches = gmm(target)
        rows[cpu] = program_features(task, sketches[0], Candidate(task.key, 0, ()), target)
    assert rows[AVX2_CPU]["target_vector_bytes"] == lg(32) and rows[AVX512_CPU]["target_vector_bytes"] == lg(64)
    assert (rows[AVX2_CPU]["target_registers"], rows[AVX512_CPU]["target_registers"]) == (16, 32)
    # Zen 3 and Zen 4 both issue two 256-bit FMAs a cycle (Zen 4 splits a 512-bit one in halves).
    assert rows[AVX512_CPU]["target_fma_flops_per_cycle"] == rows[AVX2_CPU]["target_fma_flops_per_cycle"] == 32


def test_the_stack_estimate_is_the_stack_check_s():
    """The features predict IREE's stack limit as the `StackLimit` check does, so the metrics can hold the
    prediction against the compiler's verdicts."""
    target = pinned_target(AVX512_CPU)
    task = main_task(extract_tasks(make_workload("C2D", (1, 14, 14, 256, 256, 3, 1, 1)).mlir, target, "C2D"))
    limit = limits(target).stack_bytes
    rng = random.Random(0)
    seen = set()
    for sketch in (s for s in generate_sketches(task, target) if s.family is Family.TRANSFORM and s.knobs):
        for _ in range(30):
            c = sample_candidate(sketch, task, target, rng)
            if c is None:
                continue
            over = program_features(task, sketch, c, target)["alloc_stack_over"] == 1.0
            values = dict(c.values)
            ctx = CheckContext(sketch, values, task, target, resolve)
            assert over == (not StackLimit()(ctx))
            assert is_valid(sketch, values, task, target)
            seen.add(over)
    assert limit > 0 and seen == {False}  # sampled candidates are valid: none over the limit


def test_extractors_by_name_and_a_context_caches_features(small_task, target):
    assert set(EXTRACTORS) == {"knobs", "program"}
    extractor = make_feature_extractor("program")
    sketches = generate_sketches(small_task, target)
    ctx = TaskContext(small_task, {s.index: s for s in sketches})
    candidates = sample_fresh(sketches, small_task, target, random.Random(0), 30, set())
    first = ctx.features(candidates, extractor, target)
    again = ctx.features(candidates[:10] + candidates, extractor, target)
    assert ctx.featurized == 30
    assert (again.values[10:] == first.values).all() and (again.values[:10] == first.values[:10]).all()
    assert make_feature_extractor("knobs").name == "knobs"
    with pytest.raises(Exception, match="unknown feature extractor 'bytes'"):
        make_feature_extractor("bytes")


def test_avx2_and_avx512_targets_resolve_the_same_candidate_to_other_vectors():
    """Lanes come from the target: the same 32-wide register tile is 4 AVX2 vectors, 2 AVX-512 ones."""
    values = {}
    for cpu in (AVX2_CPU, AVX512_CPU):
        target = pinned_target(cpu)
        task, sketches = gmm(target)
        sketch = next(s for s in sketches if s.family is Family.TRANSFORM and s.knobs)
        rng = random.Random(0)
        for _ in range(300):
            c = sample_candidate(sketch, task, target, rng)
            if c is not None and resolve(sketch, c, task).level_tiles()["reg"][1:] == (1, 32, 1):
                values[cpu] = program_features(task, sketch, c, target)["vec_fma_per_step"]
                break
    if len(values) < 2:
        pytest.skip("no 1x32 register tile sampled on both CPUs")
    assert values == {AVX2_CPU: lg(4), AVX512_CPU: lg(2)}

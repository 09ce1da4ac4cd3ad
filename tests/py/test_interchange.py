"""The `Interchange` step: a contraction's cache-level loops in another order, derived, sampled, checked, emitted,
and compiled by IREE into programs that compute the same as numpy."""

from __future__ import annotations

import random
import re

import numpy as np
from conftest import PINNED_CPUS, assert_candidate_matches, matmul_bias_relu, pinned_target

from ansor_bench.workloads import make_workload
from ansor_mlir.codegen.transform_strategy import fused_fill, render_strategy, strategy_name
from ansor_mlir.core.schedule import Candidate, Family, Sketch, TileAndFuse
from ansor_mlir.core.task import main_task
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.space.annotation import is_valid, sample_candidate, sample_fresh
from ansor_mlir.space.resolve import resolve
from ansor_mlir.space.sketch_rules import cpu_rules, generate_sketches
from ansor_mlir.steps.checks import CheckContext
from ansor_mlir.steps.interchange import Interchange, InterchangeMovesLoops, InterchangeRule, order_of

M, N, K = 64, 96, 128


def interchange_sketch(task, target) -> Sketch:
    return next(s for s in generate_sketches(task, target) if any(isinstance(st, Interchange) for st in s.steps))


def mm_task(target, bias_relu: bool = True):
    mlir = matmul_bias_relu(M, N, K) if bias_relu else make_workload("GMM", (1, M, N, K)).mlir
    return mlir, main_task(extract_tasks(mlir, target, "mm"))


def values_for(sketch: Sketch, **given: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    """The values given, every other knob (all of them choices) its first option."""
    return {k.name: given.get(k.name, (0,)) for k in sketch.knobs}


# Cache tiles of both parallel loops below their workgroup tiles, K whole in the cache tile: the root's parallel
# tiles come before its reduction tiles, so a lone fill is fused with them (`fused_fill`). The 4x16 register tile
# (8 accumulators of 8 lanes, or 4 of 16) fits every x86 target's registers.
TILES = {"d0": (32, 16, 4), "d1": (96, 32, 16), "d2": (128, 1), "consumer_fusion": (1,)}


def test_the_rule_derives_an_interchanged_copy_of_the_plain_cached_sketch():
    target = pinned_target(PINNED_CPUS[1])
    _, task = mm_task(target)
    sketches = generate_sketches(task, target)
    derived = interchange_sketch(task, target)
    assert derived.index == len(sketches) - 1 and derived.rules == ("td-multi-level-tiling-cached", "interchange")
    (plain,) = [s for s in sketches if s.rules == ("td-multi-level-tiling-cached",)]
    tiling, step, *rest = derived.steps
    assert (tiling, *rest) == plain.steps and isinstance(tiling, TileAndFuse)
    assert step.level == "cache_parallel" and step.dims == (0, 1) and step.knobs[0].options == ("1,0",)
    assert Sketch.from_trace(derived.trace(), task.key, derived.index, derived.rules) == derived
    assert derived.digest != plain.digest
    assert any(isinstance(rule, InterchangeRule) for rule in cpu_rules())


def test_no_interchange_for_windows_or_single_loops():
    target = pinned_target(PINNED_CPUS[0])
    conv = main_task(extract_tasks(make_workload("C2D", (1, 14, 14, 8, 16, 3, 1, 1)).mlir, target, "c2d"))
    norm = main_task(extract_tasks(make_workload("NRM", (1, 64, 64)).mlir, target, "nrm"))
    for task in (conv, norm):
        assert not any(isinstance(st, Interchange) for s in generate_sketches(task, target) for st in s.steps)


def test_order_of_permutes_the_step_loops_in_place():
    step = Interchange((), "cache_parallel", (0, 2))
    assert order_of(step, "2,0", 4) == (2, 1, 0, 3)


def test_the_check_rejects_orders_that_change_nothing():
    target = pinned_target(PINNED_CPUS[1])
    _, task = mm_task(target)
    sketch = interchange_sketch(task, target)
    moved = values_for(sketch, **TILES)
    one_loop = {**moved, "d1": (96, 96, 16)}  # d1's cache tile is its workgroup tile: not re-tiled at that level
    inner = {**moved, "consumer_fusion": (0,)}  # the consumer chain is tiled at the cache level, not the root
    check = InterchangeMovesLoops()
    assert check(CheckContext(sketch, moved, task, target, resolve))
    assert not check(CheckContext(sketch, one_loop, task, target, resolve))
    assert not check(CheckContext(sketch, inner, task, target, resolve))
    assert is_valid(sketch, moved, task, target) and not is_valid(sketch, one_loop, task, target)


def test_the_search_samples_it_and_the_strategy_tiles_in_its_order():
    target = pinned_target(PINNED_CPUS[1])
    _, task = mm_task(target)
    sketches = generate_sketches(task, target)
    sketch = sketches[-1]
    fresh = sample_fresh(sketches, task, target, random.Random(0), 64, set())
    drawn = [c for c in fresh if c.sketch_index == sketch.index]
    assert drawn
    for candidate in drawn:
        assert resolve(sketch, candidate, task).loop_order == {"cache_parallel": (1, 0, 2)}
        text = render_strategy(sketch, candidate, task, strategy_name(task, candidate))
        assert len(re.findall(r"interchange (= )?\[1, 0, 2\]", text)) == 1  # `tile_using_for` or `fuse`


def test_an_interchanged_program_matches_numpy(target):
    """Consumers computed after the root, the cache tile interchanged (`tile_using_for ... interchange`)."""
    mlir, task = mm_task(target)
    sketch = interchange_sketch(task, target)
    values = values_for(sketch, **TILES)
    assert is_valid(sketch, values, task, target)
    rng = np.random.default_rng(0)
    a, b, bias = (rng.standard_normal(s).astype(np.float32) for s in ((M, K), (K, N), (N,)))
    assert_candidate_matches(target, mlir, "mm", task, sketch, values, [a, b, bias], np.maximum(a @ b + bias, 0))


def test_an_interchanged_program_with_a_fused_fill_matches_numpy(target):
    """A lone matmul: its fill fused with the interchanged parallel tiles (`structured.fuse ... interchange`)."""
    workload = make_workload("GMM", (1, M, N, K))
    task = main_task(extract_tasks(workload.mlir, target, "gmm"))
    sketch = interchange_sketch(task, target)
    values = values_for(sketch, d1=TILES["d0"], d2=TILES["d1"], d3=TILES["d2"])
    assert is_valid(sketch, values, task, target)
    candidate = Candidate(task.key, sketch.index, tuple(sorted(values.items())))
    resolved = resolve(sketch, candidate, task)
    assert fused_fill(sketch, task, resolved.dag, resolved) is not None
    text = render_strategy(sketch, candidate, task, strategy_name(task, candidate))
    assert "transform.structured.fuse %tiled_op tile_sizes [0, 16, 32, 0] interchange [0, 2, 1, 3]" in text
    inputs = workload.inputs()
    (expected,) = workload.reference(inputs)
    assert_candidate_matches(target, workload.mlir, workload.func_name, task, sketch, values, inputs, expected)


def test_a_sampled_candidate_compiles_and_matches_numpy(target):
    mlir, task = mm_task(target)
    sketch = interchange_sketch(task, target)
    candidate = sample_candidate(sketch, task, target, random.Random(3))
    assert candidate is not None and sketch.family is Family.TRANSFORM
    rng = np.random.default_rng(1)
    a, b, bias = (rng.standard_normal(s).astype(np.float32) for s in ((M, K), (K, N), (N,)))
    assert_candidate_matches(target, mlir, "mm", task, sketch, dict(candidate.values), [a, b, bias],
                             np.maximum(a @ b + bias, 0))

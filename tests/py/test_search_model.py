"""Features, the XGBoost cost model and the evolutionary search operators."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest
from conftest import AVX2_CPU, AVX512_CPU, pinned_target

from ansor_bench.workloads import make_workload
from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.schedule import Candidate, MicroKernel, Pad, TileKnob
from ansor_mlir.core.task import main_task
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.affine_maps import parse_affine_map
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.model.cost_model import TrainingSet, normalized_throughput
from ansor_mlir.model.feature_extractor import FeatureMatrix, KnobFeatures
from ansor_mlir.model.features import FEATURE_NAMES, featurize, footprint
from ansor_mlir.model.registry import load_cost_model, make_cost_model, pretrained_model
from ansor_mlir.model.xgb_model import OBJECTIVES
from ansor_mlir.search.evolutionary_search import EvolutionarySearch, EvolutionParams, crossover, mutate
from ansor_mlir.space.annotation import divisors, is_valid, sample_candidate
from ansor_mlir.space.resolve import resolve
from ansor_mlir.space.sketch_rules import generate_sketches


def test_conv_map_footprint_counts_the_halo():
    amap = parse_affine_map("affine_map<(d0, d1, d2, d3, d4, d5) -> (d0 * 2 + d3, d1 + d4, d5)>")
    assert [expr.terms for expr in amap.results] == [((0, 2), (3, 1)), ((1, 1), (4, 1)), ((5, 1),)]
    # A 4x4 output tile of a stride-2 3x3 window reads (2*3+2+1) x (3+2+1) x 8 input elements.
    assert footprint(amap, (4, 4, 1, 3, 3, 8)) == 9 * 6 * 8


def test_default_sketch_plan_follows_iree_levels(small_task, target):
    sketch = generate_sketches(small_task, target)[0]
    plan = resolve(sketch, Candidate(small_task.key, 0, ()), small_task).level_tiles()
    config = small_task.default_config
    dist = config.level("distribution")
    assert plan["wg"][:2] == tuple(d or e for d, e in zip(dist[:2], small_task.root.loop_extents[:2], strict=True))
    assert plan["wg"][2] == small_task.root.loop_extents[2]  # reductions are not distributed
    assert all(r <= c <= w for r, c, w in zip(plan["reg"], plan["cache"], plan["wg"], strict=True))


def test_features_have_a_fixed_order_and_distinguish_programs(small_task, target):
    sketches = generate_sketches(small_task, target)
    rng = random.Random(1)
    candidates = [sample_candidate(sketches[1], small_task, target, rng) for _ in range(20)]
    rows = [featurize(small_task, sketches[1], c, target) for c in candidates]
    assert all(len(r) == len(FEATURE_NAMES) for r in rows)
    assert rows[0] == featurize(small_task, sketches[1], candidates[0], target)
    assert len({tuple(r) for r in rows}) > 10


def test_normalized_throughput_scores_fastest_one_and_failures_zero():
    y = normalized_throughput(np.array([2.0, 1.0, np.inf, 4.0]))
    assert y.tolist() == [0.5, 1.0, 0.0, 0.25]


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_model_learns_a_ranking_and_round_trips(tmp_path, objective):
    rng = np.random.default_rng(0)
    x = rng.random((300, len(FEATURE_NAMES))).astype(np.float32)
    times = 1.0 + 4.0 * x[:, 3] + 0.1 * rng.random(300)
    data = TrainingSet()
    data.add("t", x[:100], times[:100])
    data.add("u", x[100:200], 2 * times[100:200])
    model = make_cost_model(f"xgb-{objective}", KnobFeatures())
    model.update(data)
    held_out = FeatureMatrix(FEATURE_NAMES, x[200:])
    predicted = model.predict(held_out)
    truth = 1.0 / times[200:]
    assert np.corrcoef(predicted, truth)[0, 1] > 0.8
    model.save(tmp_path / "m.json")
    again = load_cost_model(tmp_path / "m.json")
    assert np.allclose(again.predict(held_out), predicted)
    assert (again.extractor, again.objective) == (model.extractor, objective)


def test_loading_a_bad_model_names_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not a model")
    with pytest.raises(AnsorError, match="bad.json"):
        load_cost_model(bad)


def test_a_model_trained_on_other_features_is_refused(tmp_path):
    rng = np.random.default_rng(0)
    data = TrainingSet()
    data.add("t", rng.random((20, len(FEATURE_NAMES))).astype(np.float32), 1 + rng.random(20))
    model = make_cost_model("xgb", KnobFeatures())
    model.update(data)
    model.booster.feature_names = [f"f{i}" for i in range(len(FEATURE_NAMES))]
    model.save(tmp_path / "m.json")
    with pytest.raises(AnsorError, match="other features.*retrain"):
        load_cost_model(tmp_path / "m.json")
    with pytest.raises(AnsorError, match="unknown cost model 'xgb-hinge'"):
        make_cost_model("xgb-hinge")


def test_mutation_and_crossover_keep_chains_valid(small_task, target):
    sketch = generate_sketches(small_task, target)[2]
    rng = random.Random(3)
    parents = [sample_candidate(sketch, small_task, target, rng) for _ in range(2)]
    for _ in range(50):
        child = mutate(parents[0], sketch, small_task, target, rng) or parents[0]
        twin = crossover(parents[0], parents[1], sketch, small_task, target, rng)
        for c in (child, twin):
            if c is None:
                continue
            values = dict(c.values)
            assert is_valid(sketch, values, small_task, target)
            for knob in sketch.knobs:
                assert isinstance(knob, TileKnob)
                chain = values[knob.name]
                outers = (knob.extent, *chain[:-1])
                assert all(inner in divisors(outer) for outer, inner in zip(outers, chain, strict=True))
        if twin is not None:
            for name, value in twin.values:
                assert value in (dict(parents[0].values)[name], dict(parents[1].values)[name])


def test_mutation_proposes_padded_register_tiles():
    """GMM 1x40x40x40 (40 columns: not whole 16-lane vectors on the pinned AVX-512 CPU): mutants of the padding
    sketch reach 48."""
    target = pinned_target(AVX512_CPU)
    task = main_task(extract_tasks(make_workload("GMM", (1, 40, 40, 40)).mlir, target, "GMM"))
    sketch = next(s for s in generate_sketches(task, target) if s.has(Pad))
    rng = random.Random(0)
    parent = sample_candidate(sketch, task, target, rng)
    seen = set()
    for _ in range(300):
        child = mutate(parent, sketch, task, target, rng)
        if child is not None:
            assert is_valid(sketch, dict(child.values), task, target)
            seen |= {v[-1] for k, v in child.values if k == "d2"}
    assert 48 in seen


def test_mutation_changes_a_micro_kernel_shape_its_tiles_alone_did_not_fit():
    """A window micro-kernel of 4x16 with 4-row tiles: 6x16 needs rows of at least 6, so mutants reach it only
    when another knob is re-sampled with the shape (`repaired`)."""
    target = pinned_target(AVX2_CPU)
    task = main_task(extract_tasks(make_workload("C3D", (1, 4, 56, 56, 3, 64, 7, 2, 3)).mlir, target, "C3D"))
    sketch = next(s for s in generate_sketches(task, target) if "window-micro-kernel" in s.rules)
    (shape,) = sketch.step(MicroKernel).knobs
    parent = next(c for c in (sample_candidate(sketch, task, target, random.Random(s)) for s in range(500))
                  if c is not None and c.choice(shape) == "4x16" and dict(c.values)["d3"][-1] < 6)
    rng = random.Random(0)
    children = [c for c in (mutate(parent, sketch, task, target, rng) for _ in range(400)) if c is not None]
    assert all(is_valid(sketch, dict(c.values), task, target) for c in children)
    assert "6x16" in {c.choice(shape) for c in children}


def test_features_count_the_iterations_in_partial_tiles():
    """A peeled 6x16 window micro-kernel over 56-row tiles leaves 2 of every 56 output columns to the partial
    tile, over 14-row tiles 2 of 14; 4x16 over 56 leaves none."""
    target = pinned_target(AVX2_CPU)
    task = main_task(extract_tasks(make_workload("C3D", (1, 4, 224, 224, 3, 64, 7, 2, 3)).mlir, target, "C3D"))
    sketch = next(s for s in generate_sketches(task, target) if "window-micro-kernel" in s.rules)
    (shape,) = sketch.step(MicroKernel).knobs
    share = FEATURE_NAMES.index("partial_tile_share")

    def partial(mr_nr: str, rows: int) -> float:
        values = {"d1": (1, 1), "d2": (4, 4), "d3": (rows, rows), "d4": (64,), "d5": (1,), "d6": (7,), "d7": (1,),
                  "micro_kernel": (shape.options.index(mr_nr),)}
        assert is_valid(sketch, values, task, target)
        return featurize(task, sketch, Candidate(task.key, sketch.index, tuple(sorted(values.items()))), target)[share]

    assert partial("6x16", 56) == pytest.approx(2 / 56)
    assert partial("6x16", 14) == pytest.approx(2 / 14)
    assert partial("4x16", 56) == 0.0


def test_evolution_never_proposes_measured_candidates_and_learns(small_task, target):
    sketches = generate_sketches(small_task, target)
    params = EvolutionParams(population=64, generations=2)
    search = EvolutionarySearch(target, random.Random(0), params=params)
    first = search.next_batch(small_task, sketches, set(), 8)
    assert len(first) == 8 and len({c.identity for c in first}) == 8
    fake = [
        (c, MeasureResult(ErrorKind.NONE, median_s=1e-3 * (1 + i)) if i % 3 else
         MeasureResult(ErrorKind.COMPILE_ERROR, message="boom"))
        for i, c in enumerate(first)
    ]
    search.update(small_task, sketches, fake)
    assert search.model.trained
    measured = {c.identity for c in first}
    second = search.next_batch(small_task, sketches, measured, 8)
    assert second and not measured & {c.identity for c in second}
    again = EvolutionarySearch(target, random.Random(0), params=params).next_batch(small_task, sketches, set(), 8)
    assert [c.identity for c in again] == [c.identity for c in first]


def test_every_sketch_of_a_batch1_conv_featurizes(target):
    from ansor_bench.workloads import make_workload
    from ansor_mlir.frontend.task_extraction import extract_tasks

    workload = make_workload("C2D", (1, 10, 10, 8, 16, 3, 1, 1))
    (task,) = [t for t in extract_tasks(workload.mlir, target, "c2d") if t.tunable]
    sketches = generate_sketches(task, target)
    assert any(s.family == "transform" for s in sketches)
    rng = random.Random(0)
    for sketch in sketches:
        candidate = sample_candidate(sketch, task, target, rng)
        if candidate is not None:
            assert len(featurize(task, sketch, candidate, target)) == len(FEATURE_NAMES)


def test_conv_features_describe_the_strategy_actually_built(target):
    """Window loops forced unit in the strategy are unit in the features too (one `resolve` feeds both)."""
    import random

    from ansor_mlir.codegen.transform_strategy import render_strategy
    from ansor_mlir.core.schedule import Decompose, Family
    from ansor_mlir.frontend.task_extraction import extract_tasks
    from ansor_mlir.space.annotation import sample_candidate
    from ansor_mlir.space.dag import forced_unit_dims

    text = (Path(__file__).parent / "golden" / "inputs" / "c2d.mlir").read_text()
    task = next(t for t in extract_tasks(text, target, "c2d") if t.root.reduction_dims)
    sketch = next(s for s in generate_sketches(task, target) if s.family is Family.TRANSFORM and not s.has(Decompose))
    rng = random.Random(0)
    for _ in range(5):
        candidate = sample_candidate(sketch, task, target, rng)
        resolved = resolve(sketch, candidate, task)
        forced = forced_unit_dims(resolved.root, decomposed=False)
        assert forced, "a strided 3x3 window has loops the register tile keeps unit"
        reg = resolved.level_tiles()["reg"]
        assert all(reg[d] == 1 for d in forced)
        # The strategy tiles those loops by 1 at a register level, and the features read the same tiles.
        text = render_strategy(sketch, candidate, task, "s")
        assert "tile_sizes" in text
        names = list(FEATURE_NAMES)
        feats = featurize(task, sketch, candidate, target)
        volume = 1
        for d, size in enumerate(reg):
            if resolved.iterator_types[d] == "reduction":
                volume *= size
        assert feats[names.index("reg_red_volume")] == pytest.approx(math.log2(1 + volume))


def test_the_first_batches_measure_every_register_tile_shape_of_every_sketch():
    """The shipped model ranked the README example's transform 6x16 micro-kernels (1.4-1.6x IREE's default on
    Zen 3) below every pipeline 4x16 one, and a search that tried one random candidate per sketch measured no
    6x16; each (sketch, register tile shape) now gets the model's best candidate of it first."""
    import ansor_mlir
    from ansor_mlir.search.evolutionary_search import first_of_each_structure, structure

    target = pinned_target(AVX2_CPU)
    mlir = (Path(ansor_mlir.__file__).parent / "examples" / "matmul_bias_relu.mlir").read_text()
    task = main_task(extract_tasks(mlir, target, "example"))
    sketches = generate_sketches(task, target)
    by_index = {s.index: s for s in sketches}
    shapes = {(s.index, shape) for s in sketches if s.knobs
              for shape in (s.step(MicroKernel).knobs[0].options if s.step(MicroKernel) else (None,))}
    assert ("6x16" in {shape for _, shape in shapes}) and len(shapes) > 8
    search = EvolutionarySearch(target, random.Random(0), model=pretrained_model(),
                                params=EvolutionParams(population=256, generations=1))
    first = search.next_batch(task, sketches, set(), 8)
    second = search.next_batch(task, sketches, {c.identity for c in first}, 8)
    proposed = {structure(c, by_index) for c in first + second}
    assert shapes <= proposed
    # Best-ranked of each structure, in rank order; structures tried are skipped.
    ranked = [c for _, c in search.evolve(task, sketches, set())]
    firsts = first_of_each_structure(ranked, by_index, set(), 100)
    assert [structure(c, by_index) for c in firsts] == list(dict.fromkeys(structure(c, by_index) for c in ranked))
    assert not first_of_each_structure(ranked, by_index, {structure(c, by_index) for c in ranked}, 100)


def test_selection_weights_take_ranking_scores_of_any_sign():
    from ansor_mlir.search.evolutionary_search import SELECTION_FLOOR, selection_weights

    weights = selection_weights(np.array([-3.0, -1.0, 1.0]))
    assert weights.tolist() == pytest.approx([SELECTION_FLOOR, 0.5 + SELECTION_FLOOR, 1 + SELECTION_FLOOR])
    assert (selection_weights(np.array([2.0, 2.0])) > 0).all()


def test_contexts_keep_each_task_s_state_apart(small_task, target):
    """Per-task state lives in one context per task (MetaSchedule's `TuneContext`); features are extracted once
    per candidate however often evolution scores it."""
    sketches = generate_sketches(small_task, target)
    search = EvolutionarySearch(target, random.Random(0), params=EvolutionParams(population=32, generations=2))
    batch = search.next_batch(small_task, sketches, set(), 4)
    search.update(small_task, sketches, [(c, MeasureResult(ErrorKind.NONE, median_s=1e-3 * (i + 1)))
                                         for i, c in enumerate(batch)])
    (ctx,) = search.contexts.values()
    assert ctx.task is small_task and ctx.best == batch[0] and len(ctx.history) == len(batch)
    assert {c.identity for c in batch} <= set(ctx.cache) and ctx.featurized == len(ctx.cache)
    assert ctx.structures_tried

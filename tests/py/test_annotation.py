"""Annotation fills every hole validly, reproducibly, and renders byte-identically."""

from __future__ import annotations

import json
import random

from ansor_bench.workloads import make_workload
from ansor_mlir.codegen.tuning_spec import render_spec
from ansor_mlir.core.schedule import Candidate, tile_knobs
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import main_task
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.space.annotation import (
    divisors,
    is_valid,
    pipeline_cache_tile_vector_elements,
    pipeline_consumer_vector_elements,
    sample_candidate,
)
from ansor_mlir.space.resolve import render_config
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.tuner import build_input


def test_sketch_zero_is_iree_default(small_task, target):
    sketches = generate_sketches(small_task, target)
    assert sketches[0].rules == ("iree-default",)
    assert sketches[0].fixed_config == small_task.default_config
    pipeline = [s for s in sketches[1:] if s.family == "pipeline"]
    transform = [s for s in sketches if s.family == "transform"]
    assert {s.rules[0] for s in pipeline} == {"multi-level-tiling", "multi-level-tiling-cached"}
    assert {s.rules[0] for s in transform} == {"td-multi-level-tiling", "td-multi-level-tiling-cached"}
    cached = [s for s in sketches if s.rules == ("multi-level-tiling-cached",)][0]
    assert cached.levels == (
        "distribution", "cache_parallel", "cache_reduction", "vector_common_parallel", "vector_reduction",
    )


def test_samples_are_divisor_chains_and_valid(small_task, target):
    sketches = generate_sketches(small_task, target)
    rng = random.Random(7)
    for sketch in sketches[1:]:
        for _ in range(50):
            cand = sample_candidate(sketch, small_task, target, rng)
            assert cand is not None
            values = dict(cand.values)
            for knob in tile_knobs(sketch.knobs):
                chain = values[knob.name]
                bound = knob.extent
                for size in chain:
                    assert size in divisors(bound)
                    bound = size
            assert is_valid(sketch, values, small_task, target)
            lanes = target.vector_lanes(4)
            assert values["d1"][-1] % lanes == 0


def test_same_seed_same_candidates(small_task, target):
    sketch = generate_sketches(small_task, target)[1]
    a = [sample_candidate(sketch, small_task, target, random.Random(3)) for _ in range(3)]
    b = [sample_candidate(sketch, small_task, target, random.Random(3)) for _ in range(3)]
    assert a == b


def test_candidate_round_trips_and_renders_identically(small_task, target):
    sketches = generate_sketches(small_task, target)
    cand = sample_candidate(sketches[1], small_task, target, random.Random(1))
    again = Candidate.from_dict(json.loads(json.dumps(cand.to_dict())))
    assert again == cand
    first = render_spec([(small_task, render_config(sketches[1], cand, small_task))])
    second = render_spec([(small_task, render_config(sketches[1], again, small_task))])
    assert first == second


def test_invalid_vector_tiles_are_rejected(small_task, target):
    sketch = generate_sketches(small_task, target)[1]
    huge = {"d0": (128, 128), "d1": (128, 128), "d2": (128,)}
    assert not is_valid(sketch, huge, small_task, target)
    unaligned = {"d0": (8, 8), "d1": (24, 24) if 128 % 24 == 0 else (4, 4), "d2": (8,)}
    assert not is_valid(sketch, unaligned, small_task, target)


def test_pipeline_rejects_consumer_vectors_iree_refuses(target):
    """A softmax consumer is vectorized at the cache tile over the whole row: 64x128 floats is refused."""
    workload = make_workload("softmax", (1536, 128))
    task = main_task(extract_tasks(workload.mlir, target, "softmax"))
    cached = [s for s in generate_sketches(task, target) if s.rules == ("multi-level-tiling-cached",)][0]
    assert not is_valid(cached, {"d0": (256, 64, 16), "d1": (2, 2)}, task, target)
    assert is_valid(cached, {"d0": (256, 16, 16), "d1": (2, 2)}, task, target)
    assert pipeline_consumer_vector_elements(cached, {"d0": (256, 16, 16), "d1": (2, 2)}, task) == 16 * 128


def test_pipeline_rejects_cache_tile_fills_iree_refuses():
    """Compile-only, AVX2 and AVX-512: when the cache level loops over K, IREE vectorizes the accumulator's fill
    and the bias + relu at the whole cache tile. A 128x32 tile (16 KiB) of a 512^3 matmul + bias + relu is
    refused on AVX2 ("large vector sizes") and built on AVX-512; annotation agrees on both."""
    text = make_workload("Dense", (512, 512, 512)).mlir
    cached_values = {"d0": (512, 128, 4), "d1": (64, 32, 16), "d2": (64, 2)}
    for cpu, builds in (("znver3", False), ("znver4", True)):
        pinned = resolve_target(Target(cpu=cpu))
        task = main_task(extract_tasks(text, pinned, "dense"))
        cached = [s for s in generate_sketches(task, pinned) if s.rules == ("multi-level-tiling-cached",)][0]
        assert pipeline_cache_tile_vector_elements(cached, cached_values) == 128 * 32
        assert pipeline_cache_tile_vector_elements(cached, {**cached_values, "d2": (512, 2)}) == 0  # no K loop
        assert is_valid(cached, cached_values, task, pinned) == builds, cpu
        candidate = Candidate(task.key, cached.index, tuple(sorted(cached_values.items())))
        flow = compile_to_phase(text, pinned.compile_flags(), "flow", "dense")
        (build,) = LocalBuilder(pinned, workers=1, timeout_s=120).build([build_input(task, cached, candidate, flow)])
        assert build.ok == builds, (cpu, build.message)
        assert builds or "large vector sizes" in build.message


def test_one_workgroup_over_a_large_output_is_rejected(target):
    """One workgroup over ConvLayer's whole 112x112x64 output: IREE allocates it on the stack (3 MiB)."""
    workload = make_workload("ConvLayer", (1, 224, 224, 3, 64, 7, 2, 3))
    task = main_task(extract_tasks(workload.mlir, target, "ConvLayer"))
    cached = [s for s in generate_sketches(task, target) if s.rules == ("td-multi-level-tiling-cached",)][0]
    values = {"cache_write": (1,), "consumer_fusion": (0,), "d1": (112, 2), "d2": (112, 2), "d3": (64, 64, 32),
              "d4": (7,), "d5": (7,), "d6": (1, 1), "lowering": (0,)}
    assert not is_valid(cached, values, task, target)
    assert is_valid(cached, {**values, "d1": (56, 2)}, task, target)

"""Convolution decomposition: register tiles of several output pixels over strided and dilated windows."""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import assert_builds_match_reference

from ansor_bench.workloads import make_workload
from ansor_mlir.codegen.transform_strategy import render_strategy
from ansor_mlir.core.schedule import Candidate, Decompose, tile_knobs
from ansor_mlir.core.task import main_task
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.compare import run_once
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.space.annotation import is_valid, sample_candidate
from ansor_mlir.space.dag import conv_2d_loops, depthwise_conv_2d_loops, task_dag
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.tuner import build_input

C2D = (1, 14, 14, 3, 16, 3, 2, 1)  # stride 2: 7x7 outputs
DIL = (1, 14, 14, 3, 16, 3, 1, 1, 2)  # dilation 2: 12x12 outputs


def main_of(name: str, shape: tuple[int, ...], target):
    workload = make_workload(name, shape)
    return workload, main_task(extract_tasks(workload.mlir, target, name))


@pytest.mark.parametrize("name, shape, expected", [
    ("C2D", C2D, "full"), ("DIL", DIL, "full"), ("ConvLayer", (1, 14, 14, 8, 16, 3, 2, 1), "full"),
    ("DEP", (1, 8, 8, 16, 3, 1, 1), "depthwise"), ("DEP", (1, 9, 9, 16, 3, 2, 1), "depthwise"),
    ("GRP", (1, 8, 8, 16, 32, 3, 2, 1, 1, 4), None), ("GMM", (1, 32, 32, 32), None),
])
def test_decompose_sketch_only_for_2d_convolutions(target, name, shape, expected):
    _, task = main_of(name, shape, target)
    root = task_dag(task).ops[task_dag(task).root]
    assert (conv_2d_loops(root) is not None) == (expected == "full")
    assert (depthwise_conv_2d_loops(root) is not None) == (expected == "depthwise")
    assert any(s.has(Decompose) for s in generate_sketches(task, target)) == (expected is not None)


def test_only_oh_and_kh_are_unit_and_the_strategy_decomposes(target):
    _, task = main_of("C2D", C2D, target)
    sketch = next(s for s in generate_sketches(task, target) if s.has(Decompose))
    n, oh, ow, co, kh, kw, ci = conv_2d_loops(task_dag(task).ops[task_dag(task).root])
    register = {k.dim for k in tile_knobs(sketch.knobs) if any(lv.startswith("vector_") for lv in k.levels)}
    assert ow in register and kw in register and oh not in register and kh not in register
    candidate = sample_candidate(sketch, task, target, random.Random(0))
    text = render_strategy(sketch, candidate, task, "s")
    assert "transform.structured.specialize" in text and "transform.structured.decompose" in text
    assert "fold_unit_extent_dims_via_slices" not in text


@pytest.mark.parametrize("name, shape", [("C2D", C2D), ("DIL", DIL)])
def test_multi_pixel_register_tiles_compile_run_and_match_numpy(target, name, shape):
    """7 (6) output pixels by one vector of output channels: within the host's register file."""
    workload, task = main_of(name, shape, target)
    sketch = next(s for s in generate_sketches(task, target) if s.has(Decompose))
    n, oh, ow, co, kh, kw, ci = conv_2d_loops(task_dag(task).ops[task_dag(task).root])
    chains = {f"d{ow}": (task_dag(task).ops[task_dag(task).root].extents[ow], 7 if name == "C2D" else 6),
              f"d{co}": (16, target.vector_lanes(4)), f"d{kw}": (1,), f"d{ci}": (3,)}
    values = {k.name: chains.get(k.name, (k.extent,) * len(k.levels)) for k in tile_knobs(sketch.knobs)}
    values |= {"cache_write": (0,), "lowering": (0,)}
    assert is_valid(sketch, values, task, target), values
    candidate = Candidate(task.key, sketch.index, tuple(sorted(values.items())))
    flow = compile_to_phase(workload.mlir, target.compile_flags(), "flow", name)
    (build,) = LocalBuilder(target, workers=1, timeout_s=120).build([build_input(task, sketch, candidate, flow)])
    assert build.ok, f"{build.error.value} {build.message}"
    inputs = workload.inputs(seed=0)
    (got,) = run_once(build.program.vmfb, workload.func_name, inputs)
    (expected,) = workload.reference(inputs)
    np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-4)


def test_depthwise_register_tiles_of_several_pixels_compile_run_and_match_numpy(target):
    """A strided depthwise convolution without a fused pad (named op kept by IREE): 1-D depthwise tiles."""
    workload, task = main_of("DEP", (1, 9, 9, 16, 3, 2, 1), target)
    sketch = next(s for s in generate_sketches(task, target) if s.has(Decompose))
    rng = random.Random(0)
    candidates = [c for c in (sample_candidate(sketch, task, target, rng) for _ in range(8)) if c is not None][:2]
    text = render_strategy(sketch, candidates[0], task, "s")
    assert "transform.structured.decompose" in text
    flow = compile_to_phase(workload.mlir, target.compile_flags(), "flow", "DEP")
    assert_builds_match_reference(target, [build_input(task, sketch, c, flow) for c in candidates], workload)

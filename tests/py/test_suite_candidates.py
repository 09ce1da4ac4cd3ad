"""Every suite entry, at a small shape: a seeded random candidate of each sketch family is right.

For the entry's main task, one random candidate per family (where the family
applies) is attached to the whole workload's IREE module by the real builder,
compiled with plain `iree-compile`, run, and compared with the workload's own
numpy reference, not with IREE's output.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from ansor_bench.workloads import make_workload, suite_names
from ansor_mlir.core.schedule import FAMILIES
from ansor_mlir.core.task import main_task
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.compare import run_once
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.space.annotation import sample_candidate
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.tuner import build_input

# Reduced channels and spatial sizes, same generators and argument order as the suite.
SMALL_SHAPES = {
    "GMM": (1, 32, 32, 32),
    "C1D": (1, 32, 16, 32, 3, 2, 1),
    "C2D": (1, 14, 14, 3, 16, 3, 2, 1),
    "C3D": (1, 4, 10, 10, 3, 16, 3, 2, 1),
    "GRP": (1, 8, 8, 16, 32, 3, 2, 1, 1, 4),
    "DIL": (1, 14, 14, 3, 16, 3, 2, 1, 2),
    "DEP": (1, 8, 8, 16, 3, 1, 1),
    "T2D": (1, 4, 4, 32, 16, 4, 2, 1),
    "CAP": (1, 8, 8, 8, 8, 3, 2, 1),
    "NRM": (1, 64, 64),
    "ConvLayer": (1, 14, 14, 8, 16, 3, 2, 1),
    "TBS": (1, 16, 2, 16),
    "softmax": (4, 256),
}
SEED = 3


def test_every_suite_entry_has_a_small_shape():
    assert set(suite_names()) == set(SMALL_SHAPES)


@pytest.mark.parametrize("name", list(SMALL_SHAPES))
def test_random_candidate_of_each_family_matches_numpy(name, target):
    workload = make_workload(name, SMALL_SHAPES[name])
    task = main_task(extract_tasks(workload.mlir, target, name))
    sketches = generate_sketches(task, target)
    rng = random.Random(SEED)
    picks = {}
    for family in FAMILIES:
        open_sketches = [s for s in sketches if s.family == family and s.knobs]
        if open_sketches:
            sketch = rng.choice(open_sketches)
            picks[family] = (sketch, sample_candidate(sketch, task, target, rng))
    assert "transform" in picks, f"{name}: the transform family derives no sketch"
    assert all(c is not None for _, c in picks.values()), f"{name}: no valid candidate"
    flow = compile_to_phase(workload.mlir, target.compile_flags(), "flow", name)
    builds = LocalBuilder(target, workers=2, timeout_s=120).build([
        build_input(task, sketch, candidate, flow) for sketch, candidate in picks.values()
    ])
    inputs = workload.inputs(seed=SEED)
    expected = workload.reference(inputs)
    for (family, (sketch, candidate)), build in zip(picks.items(), builds, strict=True):
        what = f"{name} {family} {sketch.rules} {dict(candidate.values)}"
        assert build.ok, f"{what}: {build.error.value} {build.message}"
        got = run_once(build.program.vmfb, workload.func_name, inputs)
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=2e-4, atol=2e-4, err_msg=what)

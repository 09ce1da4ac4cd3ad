"""The transform sketch family on the real IREE: strategies compile, run, verify, and apply."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from ansor_bench.workloads import make_workload
from ansor_mlir import api
from ansor_mlir.codegen.transform_strategy import render_strategy
from ansor_mlir.core.task import main_task
from ansor_mlir.database.records import read_records
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.compare import run_once
from ansor_mlir.mlir.iree_compiler import compile_vmfb
from ansor_mlir.space.annotation import is_valid, sample_candidate
from ansor_mlir.space.resolve import has_interior_unit_dim
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.tuner import TuneOptions

CONV = """
func.func @conv(%x: tensor<1x10x10x8xf32>, %w: tensor<3x3x8x16xf32>) -> tensor<1x8x8x16xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x8x8x16xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<1x8x8x16xf32>) -> tensor<1x8x8x16xf32>
  %c = linalg.conv_2d_nhwc_hwcf ins(%x, %w : tensor<1x10x10x8xf32>, tensor<3x3x8x16xf32>)
      outs(%f : tensor<1x8x8x16xf32>) -> tensor<1x8x8x16xf32>
  return %c : tensor<1x8x8x16xf32>
}
"""


def conv_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    out = np.zeros((1, 8, 8, 16), np.float32)
    for kh in range(3):
        for kw in range(3):
            out += np.einsum("nhwc,cf->nhwf", x[:, kh:kh + 8, kw:kw + 8, :], w[kh, kw])
    return out


def test_candidates_render_byte_identical_strategies(small_task, target):
    sketches = [s for s in generate_sketches(small_task, target) if s.family == "transform"]
    assert sketches
    for sketch in sketches:
        candidate = sample_candidate(sketch, small_task, target, random.Random(5))
        first = render_strategy(sketch, candidate, small_task, "s")
        assert first == render_strategy(sketch, candidate, small_task, "s")
        assert "tile_using_forall" in first and "no_pipeline" in first


def test_batch1_conv_is_tuned_by_the_transform_family_and_applies(tmp_path, target):
    (task,) = extract_tasks(CONV, target, "conv")
    assert task.default_config is None and task.tunable
    log = tmp_path / "log.jsonl"
    options = TuneOptions(trials=5, log=log, seed=2, policy="random", progress=False, batch_size=4)
    result = api.tune(CONV, target, options=options)
    records = read_records(log)
    # IREE's default and 2 candidates searched; of those, the ones faster than the default as tasks (at most
    # verify=2) checked in the whole program.
    measured = [r for r in records if r.program is None]
    default = next(r for r in measured if r.is_default)
    faster = [r for r in measured if r.ok and not r.is_default and r.result.median_s < default.result.median_s]
    assert len(measured) == 3 and len(records) == 3 + min(2, len(faster))
    assert all(r.family == "transform" for r in records if r.candidate.sketch_index)
    assert any(r.ok and r.candidate.sketch_index for r in records), [r.result.message for r in records]
    out = tmp_path / "tuned.vmfb"
    assert compile_vmfb(result.module, [], out).ok
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1, 10, 10, 8)).astype(np.float32)
    w = rng.uniform(-1, 1, (3, 3, 8, 16)).astype(np.float32)
    (got,) = run_once(out, "conv", [x, w])
    np.testing.assert_allclose(got, conv_reference(x, w), rtol=1e-4, atol=1e-4)
    # The whole-program check may reject the task's fastest candidate; the module carries what it applied.
    (task_result,) = result.tasks
    applied = task_result.applied_record or task_result.best_record
    library = api.emit_transform_library(CONV, log, target)
    if applied.candidate.sketch_index:
        assert "transform_dialect_codegen" in result.module
        assert "@__kernel_config" in library and "ansor_strategy_" in library
    else:
        assert "transform_dialect_codegen" not in result.module and "ansor_strategy_" not in library


def test_version1_records_still_read(tmp_path):
    line = {
        "version": 1, "target": "llvm-cpu:host:t1", "task": "k", "task_name": "t",
        "sketch": {"index": 1, "pipeline": "DoubleTilingExpert", "rules": ["multi-level-tiling"]},
        "values": {"d0": [8, 4]}, "config": {"pipeline": "DoubleTilingExpert", "levels": {}},
        "root_index": 0, "result": {"error": "none", "median_s": 1.0}, "timestamp": 0.0,
    }
    log = Path(tmp_path / "v1.jsonl")
    log.write_text(json.dumps(line) + "\n")
    (record,) = read_records(log)
    assert record.family == "pipeline"


@pytest.mark.parametrize("lowering", [0, 1])
def test_strategy_knobs_change_the_text(small_task, target, lowering):
    sketch = [s for s in generate_sketches(small_task, target) if s.family == "transform"][0]
    candidate = sample_candidate(sketch, small_task, target, random.Random(1))
    values = dict(candidate.values)
    values["lowering"] = (lowering,)
    changed = type(candidate)(candidate.task_key, candidate.sketch_index, tuple(sorted(values.items())))
    text = render_strategy(sketch, changed, small_task, "s")
    # outerproduct is the op's default and prints without the attribute; another choice is named.
    assert "transform.apply_patterns.vector.lower_contraction" in text
    assert ("lower_contraction lowering_strategy = dot" in text) == (lowering == 1)


def test_interior_unit_dims_are_recognised():
    assert has_interior_unit_dim((1, 2, 1, 16)) and has_interior_unit_dim((4, 1))
    assert not has_interior_unit_dim((1, 1, 2, 16)) and not has_interior_unit_dim((1, 2, 2, 16))
    assert not has_interior_unit_dim(())


def test_depthwise_candidate_with_an_interior_unit_output_dim_is_rejected(target):
    """DEP, register tile 2 rows x 1 column: MLIR's write folding kept only the first row (wrong answers)."""
    workload = make_workload("DEP", (1, 8, 8, 16, 3, 1, 1))
    task = main_task(extract_tasks(workload.mlir, target, "DEP"))
    sketch = next(s for s in generate_sketches(task, target) if s.family == "transform")
    bad = {"cache_write": (1,), "d1": (4, 2), "d2": (2, 1), "d3": (16, 16), "lowering": (0,)}
    good = {**bad, "d2": (2, 2)}
    assert not is_valid(sketch, bad, task, target)
    assert is_valid(sketch, good, task, target)

"""Builder and runner on the real IREE: failures are recorded, never raised."""

from __future__ import annotations

import numpy as np
import pytest

from ansor_mlir.core.measure_result import ErrorKind
from ansor_mlir.core.task import IreeConfig
from ansor_mlir.measure.builder import Builder, BuildInput
from ansor_mlir.measure.runner import Runner
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.tuning.tuner import make_inputs, task_module

GOOD = IreeConfig(
    "DoubleTilingExpert",
    (("distribution", (32, 64, 0)), ("vector_common_parallel", (4, 16, 0)), ("vector_reduction", (0, 0, 4))),
)
BROKEN = IreeConfig("DoubleTilingExpert", (("distribution", (32,)),))


@pytest.fixture(scope="module")
def flow(small_task, target):
    return compile_to_phase(task_module(small_task), target.compile_flags(), "flow", "task")


@pytest.fixture()
def runner(target):
    r = Runner(target, min_time_s=0.02)
    yield r
    r.close()


def build(target, small_task, flow, config, path, timeout_s=60.0):
    builder = Builder(target, timeout_s=timeout_s)
    return builder.build([BuildInput(small_task.key, flow, small_task.root_index, config, path)])[0]


def test_candidate_is_checked_against_reference(tmp_path, target, small_task, flow, runner):
    inputs = make_inputs(small_task, tmp_path, seed=0)
    ref_paths = [str(tmp_path / "ref0.npy")]
    default = build(target, small_task, flow, None, tmp_path / "d.vmfb")
    measured = runner.run(default, inputs, None, save_outputs=ref_paths)
    assert measured.ok and measured.repeats >= 5
    a, b, bias = (np.load(p) for p in inputs)
    expected = np.maximum(a @ b + bias, 0)
    np.testing.assert_allclose(np.load(ref_paths[0]), expected, rtol=1e-4, atol=1e-4)

    tuned = build(target, small_task, flow, GOOD, tmp_path / "t.vmfb")
    assert tuned.error == ErrorKind.NONE
    result = runner.run(tuned, inputs, ref_paths)
    assert result.ok, result.message

    np.save(ref_paths[0], np.load(ref_paths[0]) + 1.0)
    wrong = runner.run(tuned, inputs, ref_paths)
    assert wrong.error == ErrorKind.WRONG_ANSWER and not wrong.ok


def test_compile_failures_are_data(tmp_path, target, small_task, flow):
    broken = build(target, small_task, flow, BROKEN, tmp_path / "b.vmfb")
    assert broken.error == ErrorKind.COMPILE_ERROR
    assert broken.message
    slow = build(target, small_task, flow, GOOD, tmp_path / "s.vmfb", timeout_s=0.01)
    assert slow.error == ErrorKind.COMPILE_TIMEOUT


def test_missing_module_is_a_runtime_error(tmp_path, target, small_task, runner):
    from ansor_mlir.core.measure_result import BuildResult

    inputs = make_inputs(small_task, tmp_path, seed=0)
    ghost = BuildResult(str(tmp_path / "missing.vmfb"), ErrorKind.NONE, "", 0.0)
    assert runner.run(ghost, inputs, None).error == ErrorKind.RUNTIME_ERROR

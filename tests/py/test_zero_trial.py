"""Zero-trial mode: a model trained on measured records picks a program for a task it never measured."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import matmul_bias_relu

from ansor_mlir import api
from ansor_mlir.core.measure_result import ErrorKind
from ansor_mlir.database.records import read_records
from ansor_mlir.database.training_data import training_set
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.compare import run_once
from ansor_mlir.mlir.iree_compiler import compile_vmfb
from ansor_mlir.model.registry import make_cost_model
from ansor_mlir.tuning.tuner import TuneOptions


def test_model_trained_on_one_shape_picks_for_another_and_the_pick_is_correct(tmp_path, target):
    train_mm = matmul_bias_relu(64, 128, 64)
    log = tmp_path / "train.jsonl"
    api.tune(train_mm, target, trials=10, log=log, seed=0, policy="random", progress=False)
    model = make_cost_model()
    model.update(training_set(read_records(log), extract_tasks(train_mm, target, "train"), target))
    assert model.trained
    model_path = tmp_path / "model.json"
    model.save(model_path)

    new_mm = matmul_bias_relu(96, 64, 128)
    pick_log = tmp_path / "pick.jsonl"
    options = TuneOptions(trials=0, log=pick_log, model=model_path, progress=False)
    result = api.tune(new_mm, target, options=options)
    (pick,) = read_records(pick_log)
    assert pick.result.error == ErrorKind.NOT_MEASURED and pick.result.median_s is None
    out = tmp_path / "pick.vmfb"
    assert compile_vmfb(result.module, [], out).ok
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (96, 128)).astype(np.float32)
    b = rng.uniform(-1, 1, (128, 64)).astype(np.float32)
    bias = rng.uniform(-1, 1, 64).astype(np.float32)
    (got,) = run_once(out, "mm", [a, b, bias])
    np.testing.assert_allclose(got, np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-4)


def test_zero_trial_without_a_model_is_a_clear_error(tmp_path, small_mm, target):
    options = TuneOptions(trials=0, log=tmp_path / "l.jsonl", model="none", progress=False)
    with pytest.raises(AnsorError, match="zero-trial mode .* needs a trained cost model"):
        api.tune(small_mm, target, options=options)

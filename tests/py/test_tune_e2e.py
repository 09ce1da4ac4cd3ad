"""End to end on the real IREE: tune, apply, emit a spec, resume after a kill."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import matmul_bias_relu

from ansor_mlir import api
from ansor_mlir.database.records import best_records, read_records
from ansor_mlir.measure.compare import run_once
from ansor_mlir.mlir.iree_compiler import compile_vmfb
from ansor_mlir.tuning.callbacks import TuningCallback


class Events(TuningCallback):
    """Records what the loop reports, in order."""

    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def on_start(self, results, trials):
        self.seen.append(("start", trials, tuple(r.trials for r in results)))

    def on_measured(self, results, index, records):
        self.seen.append(("measured", index, len(records), results[index].trials))

    def on_task_done(self, result):
        self.seen.append(("done", result.trials))

    def on_end(self, results):
        self.seen.append(("end", sum(r.trials for r in results)))


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, small_mm, target):
    log = tmp_path_factory.mktemp("tune") / "log.jsonl"
    events = Events()
    result = api.tune(small_mm, target, trials=6, log=log, seed=1, progress=False, callbacks=[events])
    return result, log, events


def test_the_loop_reports_each_measurement_to_callbacks(tuned):
    _, _, events = tuned
    # The reference is measured before the search starts; of 6 trials, 2 are kept for checking the best
    # candidates in the whole program, so three candidates are left: one batch of at most 8, whose records
    # are reported (and logged) one by one as their measurements complete.
    assert events.seen == [("start", 3, (1,)), ("measured", 0, 1, 2), ("measured", 0, 1, 3), ("measured", 0, 1, 4),
                           ("done", 4), ("end", 4)]


def test_tuned_module_builds_with_plain_iree_compile_and_matches_numpy(tuned, tmp_path, small_mm):
    result, log, _ = tuned
    records = read_records(log)
    assert len([r for r in records if r.program is None]) == 4
    assert 1 <= len([r for r in records if r.program is not None]) <= 2
    assert all(r.target == records[0].target for r in records)
    (task_result,) = result.tasks
    assert task_result.best_s <= task_result.default_s
    out = tmp_path / "tuned.vmfb"
    assert compile_vmfb(result.module, [], out).ok
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (128, 128)).astype(np.float32) for _ in range(2))
    bias = rng.uniform(-1, 1, 128).astype(np.float32)
    (got,) = run_once(out, "mm", [a, b, bias])
    np.testing.assert_allclose(got, np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-4)


def test_kill_and_resume_loses_nothing_and_remeasures_nothing(tmp_path, target):
    module = tmp_path / "mm.mlir"
    module.write_text(matmul_bias_relu(64, 64, 64))
    log = tmp_path / "log.jsonl"
    cmd = [sys.executable, "-m", "ansor_mlir.cli", str(module),
           f"--ansor-tune=trials=12 log={log} batch-size=2 progress=0", "-o", str(tmp_path / "out.mlir")]
    errors = tmp_path / "first_run.err"
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errors.open("w"))
    deadline = 120
    import time

    start = time.time()
    while time.time() - start < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= 3:
            break
        assert proc.poll() is None, f"tuner exited early: {errors.read_text()[-2000:]}"
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    before = log.read_text()
    n_before = len(read_records(log))
    assert 3 <= n_before < 12
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    after = log.read_text()
    assert after.startswith(before)
    records = read_records(log)
    searched = [r.candidate.identity for r in records if r.program is None]
    checked = [r.candidate.identity for r in records if r.program is not None]
    assert len(searched) == 10 and len(set(searched)) == 10  # 12 trials: 10 searched, 2 kept for verification
    assert len(checked) <= 2 and set(checked) <= set(searched)
    out = Path(tmp_path / "out.mlir").read_text()
    assert "flow.executable" in out
    # The output applies what the log decided: a configuration, or none where the whole program rejected every
    # checked candidate (IREE's default).
    chosen = best_records(records, target.key, target.fingerprint)
    configured = "compilation_info" in out or "translation_info" in out or "#config" in out
    assert configured == any(not r.is_default for r in chosen.values())

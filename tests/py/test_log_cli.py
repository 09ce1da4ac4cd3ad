"""`ansor-log`: a log's summary per task, and a distilled log that applies as the whole one does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from conftest import matmul_bias_relu

from ansor_mlir import api
from ansor_mlir.database.records import best_records, read_program_records, read_records

LIT = Path(__file__).parents[1] / "lit"
LOG = LIT / "Inputs" / "mm64_log.jsonl"  # two targets; a wrong answer and a corrupt line among its records


def ansor_log(*args: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    command = shutil.which("ansor-log", path=path) or pytest.skip("the ansor-log console script is not installed")
    return subprocess.run([command, *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def tuned_log(tmp_path_factory, target) -> Path:
    log = tmp_path_factory.mktemp("log") / "mm.jsonl"
    api.tune(matmul_bias_relu(16, 16, 16), target, trials=3, verify=0, progress=False, log=log, name="mm")
    return log


def test_summary_gives_each_tasks_trials_failures_best_and_speedup(tuned_log):
    done = ansor_log("summary", str(tuned_log), "--format", "json")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    records = read_records(tuned_log)
    (best,) = best_records(records, records[0].target, records[0].fingerprint).values()
    default = next(r for r in records if r.is_default)
    assert (row["task"], row["trials"]) == ("mm_dispatch_0", 3)
    assert row["best_s"] == best.result.median_s and row["default_s"] == default.result.median_s
    assert row["speedup"] == pytest.approx(default.result.median_s / best.result.median_s)
    table = ansor_log("summary", str(tuned_log))
    assert table.returncode == 0 and table.stdout.startswith(f"{records[0].target} ({records[0].fingerprint}):\n")
    header, line = table.stdout.splitlines()[1:3]
    assert header.split() == ["task", "trials", "failed", "best", "IREE", "default", "speedup", "applied"]
    assert line.split()[:2] == ["mm_dispatch_0", "3"] and f"{row['speedup']:.2f}x" in line


def test_summary_counts_failures_by_kind_per_target():
    done = ansor_log("summary", str(LOG))
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("ansor-log: warning: ") and "mm64_log.jsonl:4: skipping corrupt" in done.stderr
    assert "llvm-cpu:host:t1:" in done.stdout and "llvm-cpu:znver9:t1:" in done.stdout
    assert "1 wrong_answer" in done.stdout


def test_distill_keeps_what_applying_the_log_needs(tmp_path, tuned_log):
    best = tmp_path / "best.jsonl"
    done = ansor_log("distill", str(tuned_log), "-o", str(best))
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(f"ansor-log: wrote {best}: 1 records (1 tasks)")
    assert len(read_records(best)) == 1 and not read_program_records(best)
    module = matmul_bias_relu(16, 16, 16)
    assert api.apply_best(module, best, name="mm") == api.apply_best(module, tuned_log, name="mm")
    again = ansor_log("distill", str(tuned_log), "-o", str(best))
    assert again.returncode == 1 and again.stderr == f"ansor-log: error: {best}: exists; distill writes a new log " \
                                                      "(remove it, or name another file)\n"


def test_distill_keeps_one_record_per_task_and_target(tmp_path):
    best = tmp_path / "best.jsonl"
    assert ansor_log("distill", str(LOG), "-o", str(best)).returncode == 0
    kept = read_records(best)
    assert sorted(r.target for r in kept) == ["llvm-cpu:host:t1", "llvm-cpu:znver9:t1"]
    module = (LIT / "apply_best.mlir").read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the whole log's corrupt line
        assert api.apply_best(module, best) == api.apply_best(module, LOG)


@pytest.mark.parametrize(("args", "message"), [
    (["summary", "missing.jsonl"], "ansor-log: error: missing.jsonl: no such tuning log"),
    ([], "ansor-log: error: the following arguments are required: command (see --help)"),
    (["distill", str(LOG)], "ansor-log distill: error: the following arguments are required: -o (see --help)"),
])
def test_errors_are_one_line(args, message):
    done = ansor_log(*args)
    assert done.returncode == 1 and done.stderr == message + "\n"

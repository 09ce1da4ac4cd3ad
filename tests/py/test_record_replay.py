"""Records replay anywhere: a version-2 record (sketch index + rule names) and a version-3 record (the whole
trace) rebuild the same program, the trace alone needs no rule list, and another target's record is not applied."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"
sys.path.insert(0, str(GOLDEN))

from make_golden import TARGETS, canonical  # noqa: E402

from ansor_mlir import api  # noqa: E402
from ansor_mlir.codegen.transform_strategy import render_strategy  # noqa: E402
from ansor_mlir.core.schedule import Family, Sketch  # noqa: E402
from ansor_mlir.database.records import (  # noqa: E402
    FORMAT_VERSION,
    Record,
    append_records,
    best_records,
    read_records,
    task_history,
    upgrade_legacy,
)
from ansor_mlir.frontend.task_extraction import extract_tasks  # noqa: E402
from ansor_mlir.space.resolve import render_config  # noqa: E402
from ansor_mlir.space.sketch_rules import generate_sketches  # noqa: E402

TARGET = TARGETS["znver4"]
INPUT = GOLDEN / "inputs" / "gmm_bias_relu.mlir"


@pytest.fixture(scope="module")
def task_and_sketches():
    task = extract_tasks(INPUT.read_text(), TARGET, "gmm")[0]
    return task, generate_sketches(task, TARGET)


def test_version_2_log_upgrades_and_replays_like_version_3(task_and_sketches, tmp_path):
    task, sketches = task_and_sketches
    old = read_records(GOLDEN / "v2_log.jsonl")
    assert old and all(r.sketch is None for r in old)
    upgraded = upgrade_legacy(old, task.key, sketches)
    assert len(upgraded) == len(old)
    log = tmp_path / "v3.jsonl"
    append_records(log, upgraded)
    assert all(json.loads(line)["version"] == FORMAT_VERSION for line in log.read_text().splitlines())
    new = read_records(log)
    for before, after in zip(upgraded, new, strict=True):
        assert after.sketch is not None and after.sketch.digest == before.sketch.digest
        if after.family is Family.TRANSFORM:
            a = render_strategy(before.sketch, before.candidate, task, "s")
            b = render_strategy(after.sketch, after.candidate, task, "s")
            assert canonical("module attributes { transform.with_named_sequence } {\n" + a + "}\n") == canonical(
                "module attributes { transform.with_named_sequence } {\n" + b + "}\n")
        else:
            assert render_config(after.sketch, after.candidate, task) == render_config(
                before.sketch, before.candidate, task)


def test_trace_replays_without_the_rule_list(task_and_sketches, tmp_path):
    """A version-3 record rebuilds its program from its own trace, even when this run derives no such sketch."""
    task, sketches = task_and_sketches
    record = next(r for r in upgrade_legacy(read_records(GOLDEN / "v2_log.jsonl"), task.key, sketches)
                  if r.family is Family.TRANSFORM)
    rebuilt = Sketch.from_trace(record.sketch.trace(), task.key)
    assert rebuilt.digest == record.sketch.digest and rebuilt.knobs == record.sketch.knobs
    history = task_history([record], record.target, task.key, sketches[:1])  # this run derives only sketch zero
    assert history[0].candidate.sketch_index == -1
    assert render_strategy(history[0].sketch, history[0].candidate, task, "s") == render_strategy(
        record.sketch, record.candidate, task, "s")


def test_record_of_another_target_is_not_applied(task_and_sketches, tmp_path):
    task, sketches = task_and_sketches
    records = upgrade_legacy(read_records(GOLDEN / "v2_log.jsonl"), task.key, sketches)
    assert best_records(records, "llvm-cpu:znver4:t1")
    assert best_records(records, "llvm-cpu:znver3:t1") == {}
    log = tmp_path / "log.jsonl"
    shutil.copy(GOLDEN / "v2_log.jsonl", log)
    with pytest.raises(Exception, match="tune"):
        api.apply_best(INPUT, log, target="llvm-cpu", name="gmm")  # this host's key names no record


def test_records_say_what_made_them(small_mm, tmp_path):
    """Every line a tune writes names the versions that made it, and reads back with them."""
    import ansor_mlir
    from ansor_mlir.database.records import producer_versions

    versions = dict(producer_versions())
    assert set(versions) == {"ansor_mlir", "features", "iree", "schema"}
    assert versions["iree"].startswith("3.13") and versions["ansor_mlir"] == ansor_mlir.__version__
    log = tmp_path / "log.jsonl"
    api.tune(small_mm, trials=2, log=log, progress=False)
    lines = log.read_text().splitlines()
    assert lines and all(json.loads(line)["versions"] == versions for line in lines)
    records = read_records(log)
    assert records and all(dict(r.versions) == versions for r in records)
    assert [Record.from_json(r.to_json()) for r in records] == records

"""The log is append-only, versioned, and never applies across targets."""

from __future__ import annotations

import warnings

import pytest

from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.schedule import Candidate, ConfigurePipeline, Family, Sketch, TileKnob
from ansor_mlir.core.task import IreeConfig
from ansor_mlir.database.records import Record, append_records, best_records, read_records

CONFIG = IreeConfig("DoubleTilingExpert", (("distribution", (8, 8, 0)),))
KNOB = TileKnob("d0", 0, 64, ("distribution", "vector_common_parallel"))
SKETCH = Sketch("k1", 1, Family.PIPELINE, "DoubleTilingExpert", ("distribution", "vector_common_parallel"),
                (ConfigurePipeline((KNOB,), "DoubleTilingExpert"),), ("multi-level-tiling",))


def record(target: str, median: float | None, error: ErrorKind = ErrorKind.NONE, sketch: int = 1) -> Record:
    return Record(
        target=target, task_key="k1", task_name="t", candidate=Candidate("k1", sketch, (("d0", (8, 8)),)),
        sketch=SKETCH, config=CONFIG, root_index=0,
        result=MeasureResult(error, median_s=median), timestamp=1.0,
    )


def test_round_trip_and_best_per_target(tmp_path):
    log = tmp_path / "log.jsonl"
    append_records(log, [record("cpuA", 2.0), record("cpuA", 1.0), record("cpuB", 0.1)])
    append_records(log, [record("cpuA", None, ErrorKind.WRONG_ANSWER), record("cpuA", 0.5, ErrorKind.WRONG_ANSWER)])
    records = read_records(log)
    assert len(records) == 5
    assert records[0] == record("cpuA", 2.0)
    best = best_records(records, "cpuA")
    assert best["k1"].result.median_s == 1.0  # the faster wrong answer is never chosen
    assert best_records(records, "cpuC") == {}


def test_a_whole_program_check_that_timed_nothing_reads_back(tmp_path):
    """A check whose program did not build or run has no times (written as 0): it is a verdict, not corruption;
    a timed check with a zero time still is."""
    import dataclasses
    import json

    from ansor_mlir.database.records import ProgramCheck

    failed = dataclasses.replace(record("cpuA", 1.0), program=ProgramCheck(0.0, 0.0, 0.0, 0.0, 0.0, 0, False, "no"))
    log = tmp_path / "log.jsonl"
    append_records(log, [failed])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_records(log) == [failed]
    line = json.loads(log.read_text())
    line["program"]["rounds"] = 5
    log.write_text(json.dumps(line) + "\n")
    with pytest.warns(UserWarning, match="default_s"):
        assert read_records(log) == []


def test_corrupt_line_is_skipped_with_its_line_number(tmp_path):
    log = tmp_path / "log.jsonl"
    append_records(log, [record("cpuA", 2.0)])
    with open(log, "a") as f:
        f.write('{"version": 1, "trunc')  # a run killed mid-write
    before = log.read_text()
    with pytest.warns(UserWarning, match=r"log\.jsonl:2: skipping corrupt record"):
        assert len(read_records(log)) == 1
    append_records(log, [record("cpuA", 1.5)])
    assert log.read_text().startswith(before)  # nothing rewritten
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # each bad line is reported once per process, however often it is read
        assert [r.result.median_s for r in read_records(log)] == [2.0, 1.5]


def test_a_measurement_always_wins_over_a_zero_trial_pick(tmp_path):
    guess = record("cpuA", None, ErrorKind.NOT_MEASURED, sketch=2)
    assert best_records([guess], "cpuA")["k1"] == guess  # only a guess: use it
    measured = record("cpuA", 3.0)
    assert best_records([guess, measured], "cpuA")["k1"] == measured
    assert best_records([measured, guess], "cpuA")["k1"] == measured


def test_a_win_inside_the_noise_does_not_displace_the_incumbent():
    incumbent = MeasureResult(ErrorKind.NONE, median_s=1.0, spread_s=0.1)
    assert not MeasureResult(ErrorKind.NONE, median_s=0.97, spread_s=0.1).beats(incumbent)
    assert MeasureResult(ErrorKind.NONE, median_s=0.8, spread_s=0.1).beats(incumbent)
    noisy = MeasureResult(ErrorKind.NONE, median_s=65.3, spread_s=25.0)  # a noisy incumbent does not shield itself
    assert MeasureResult(ErrorKind.NONE, median_s=50.9, spread_s=3.9).beats(noisy)
    assert not MeasureResult(ErrorKind.NONE, median_s=50.9, spread_s=20.0).beats(noisy)  # nor does a noisy win count
    assert not MeasureResult(ErrorKind.WRONG_ANSWER, median_s=0.1).beats(incumbent)


def test_a_record_from_another_machine_is_not_applied():
    """Same request (`llvm-cpu:host:t1`), another CPU: the fingerprints differ, so the record is not used."""
    from dataclasses import replace

    mine = replace(record("cpuA", 2.0), fingerprint="llvm-cpu:rocketlake:abc:t1")
    theirs = replace(record("cpuA", 1.0), fingerprint="llvm-cpu:znver3:def:t1")
    best = best_records([mine, theirs], "cpuA", "llvm-cpu:rocketlake:abc:t1")
    assert best["k1"] == mine
    assert best_records([theirs], "cpuA", "llvm-cpu:rocketlake:abc:t1") == {}

"""The `Database` interface: the tuning log and the in-memory store commit, report, claim and answer alike."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from fuzz_strategies import SKETCH, good_record

from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.database.claims import claim_target
from ansor_mlir.database.database import Database
from ansor_mlir.database.json_database import JSONDatabase
from ansor_mlir.database.measure_record import Record
from ansor_mlir.database.memory_database import MemoryDatabase
from ansor_mlir.database.program_check import ProgramCheck
from ansor_mlir.database.program_record import ProgramRecord
from ansor_mlir.database.queries import best_records
from ansor_mlir.database.registry import make_database
from ansor_mlir.errors import AnsorError

TARGET_KEY = "llvm-cpu:host:t1"
TARGET = claim_target(TARGET_KEY, "")
OpenRun = Callable[[], Database]


@pytest.fixture(params=["json", "memory"])
def open_run(request, tmp_path) -> OpenRun:
    """Opens another run's handle on one store: a second process on the same log, or a second tuner sharing a
    memory database."""
    if request.param == "json":
        return lambda: JSONDatabase(tmp_path / "log.jsonl")
    first = MemoryDatabase()
    handles = iter([first])
    return lambda: next(handles, None) or MemoryDatabase(shared_with=first)


def measured(median_s: float, tile: int, **changes) -> Record:
    return replace(good_record(median_s, tile), **changes)


def choice(device: str, stamp: float) -> ProgramRecord:
    return ProgramRecord(TARGET_KEY, "fp", "program-key", ("pad-fusion",), True, device, stamp)


def test_top_k_is_the_fastest_correct_measurements_of_the_task(open_run: OpenRun):
    database = open_run()
    database.commit([
        measured(3.0, 2), measured(1.0, 4), measured(2.0, 8),
        measured(0.5, 16, result=MeasureResult(ErrorKind.WRONG_ANSWER, median_s=0.5)),  # never correct
        measured(0.1, 32, target="llvm-cpu:other:t1"),  # another target
        measured(0.2, 64, program=ProgramCheck(1.0, 0.5, 1.9, 2.0, 2.1, 5, True)),  # a program check
        measured(0.3, 2, task_key="k2", candidate=replace(good_record(0.3, 2).candidate, task_key="k2")),
    ])
    assert [r.result.median_s for r in database.top_k(TARGET_KEY, "k1", 2)] == [1.0, 2.0]
    assert [r.result.median_s for r in database.top_k(TARGET_KEY, "k1", 10)] == [1.0, 2.0, 3.0]
    assert database.top_k(TARGET_KEY, "k1", 0) == [] and database.top_k(TARGET_KEY, "k3", 5) == []
    assert [r.result.median_s for r in database.top_k("llvm-cpu:other:t1", "k1", 5)] == [0.1]


def test_top_k_keeps_to_the_machine_when_both_are_known(open_run: OpenRun):
    database = open_run()
    database.commit([measured(2.0, 2, fingerprint="cpu-a"), measured(1.0, 4, fingerprint="cpu-b"),
                     measured(3.0, 8)])  # measured on an unknown machine: applies to both
    assert [r.result.median_s for r in database.top_k(TARGET_KEY, "k1", 5, "cpu-a")] == [2.0, 3.0]
    assert [r.result.median_s for r in database.top_k(TARGET_KEY, "k1", 5)] == [1.0, 2.0, 3.0]


def test_records_read_back_as_committed_and_answer_as_the_log_does(open_run: OpenRun):
    database = open_run()
    records = [measured(2.0, 2), measured(1.0, 4),
               measured(1.5, 8, result=MeasureResult(ErrorKind.NOT_MEASURED, message="a model pick"))]
    assert database.commit(records) == records and database.appended == 3
    assert database.records() == records
    assert database.best(TARGET_KEY) == best_records(records, TARGET_KEY)
    assert database.best(TARGET_KEY)["k1"].result.median_s == 1.0
    history = database.task_records(TARGET_KEY, "k1", [SKETCH])
    assert [r.result.median_s for r in history] == [2.0, 1.0]  # the model's pick is not a measurement
    assert {r.candidate.sketch_index for r in history} == {SKETCH.index}


def test_a_unique_commit_skips_a_candidate_already_recorded(open_run: OpenRun):
    first, second = open_run(), open_run()
    first.commit([measured(2.0, 2)])
    assert second.commit([measured(1.0, 2), measured(1.0, 4)], unique=True) == [measured(1.0, 4)]
    assert [r.result.median_s for r in first.records()] == [2.0, 1.0]


def test_refresh_reports_what_other_runs_committed_once(open_run: OpenRun):
    first, second = open_run(), open_run()
    first.commit([measured(2.0, 2)])
    assert first.refresh() == ([], [])  # a run's own commits are not reported back
    records, claims = second.refresh()
    assert records == [measured(2.0, 2)] and claims == []
    assert second.refresh()[0] == []
    second.commit([measured(1.0, 4)])
    assert first.refresh()[0] == [measured(1.0, 4)]


def test_claims_keep_two_runs_apart_and_count_toward_the_budget(open_run: OpenRun):
    first, second = open_run(), open_run()
    a, b, c, d = (good_record(1.0, t).candidate for t in (2, 4, 8, 16))
    assert first.claim(TARGET, [a, b]) == {a.identity, b.identity}
    assert second.claim(TARGET, [b, c]) == {c.identity}  # b is the first run's
    assert {x.identity for x in second.refresh()[1]} == {a.identity, b.identity}
    first.commit([good_record(1.0, 2)])  # a measured: recorded now, no longer a claim
    records, claims = second.refresh()
    assert [r.candidate for r in records] == [a] and {x.identity for x in claims} == {b.identity}
    assert second.claim(TARGET, [a]) == set()  # recorded: nobody measures it again
    # A budget of 3 records for the task: a (recorded), b and c (claimed) leave no room for d.
    assert second.claim(TARGET, [d], budget=3) == set()
    first.release()
    assert second.claim(TARGET, [d], budget=3) == {d.identity}
    assert first.refresh()[1] and not second.refresh()[1]  # the second run's claims are the first's others
    second.release()
    assert first.refresh()[1] == []


def test_claims_are_per_target(open_run: OpenRun):
    first, second = open_run(), open_run()
    a = good_record(1.0, 2).candidate
    assert first.claim(TARGET, [a]) == {a.identity}
    assert second.claim(claim_target(TARGET_KEY, "another-cpu"), [a]) == {a.identity}
    first.release()
    second.release()


def test_the_latest_program_choice_is_the_programs(open_run: OpenRun):
    database = open_run()
    database.commit_program_choice(choice("local-task", 1.0))
    database.commit_program_choice(choice("local-sync", 2.0))
    assert database.records() == []  # choices are not measurements
    assert [r.device for r in open_run().program_records()] == ["local-task", "local-sync"]
    latest = database.program_choice("program-key", ("pad-fusion",), TARGET_KEY, "fp")
    assert latest is not None and latest.device == "local-sync"
    assert database.program_choice("program-key", (), TARGET_KEY, "fp") is None


def test_a_record_the_logs_readers_would_skip_is_skipped_with_their_warning(open_run: OpenRun):
    database = open_run()
    timed_nothing = ProgramCheck(0.0, 0.0, 0.0, 0.0, 0.0, 5, False)  # five rounds but no times: corrupt
    with pytest.warns(UserWarning, match="skipping corrupt record"):
        database.commit([measured(1.0, 2, program=timed_nothing)])
        assert database.records() == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        database.commit([measured(1.0, 4)])
        assert len(database.records()) == 1


def test_databases_by_instance_name_or_path(tmp_path):
    memory = MemoryDatabase()
    assert make_database(memory) is memory
    assert isinstance(make_database("memory"), MemoryDatabase)
    assert make_database(tmp_path / "a.jsonl").location == str(tmp_path / "a.jsonl")
    assert isinstance(make_database("json", tmp_path / "b.jsonl"), JSONDatabase)
    with pytest.raises(AnsorError, match="give the log's path"):
        make_database("json")
    with pytest.raises(AnsorError, match="unknown database 'sqlite': choose one of json, memory"):
        make_database("sqlite")
    with pytest.raises(AnsorError, match="not a regular file"):
        make_database(Path("/dev/full"))

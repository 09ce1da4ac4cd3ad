"""A task whose candidates all fail the same way stops spending trials, and the user hears why."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from conftest import matmul_bias_relu

from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.schedule import Candidate
from ansor_mlir.core.target import detect_host
from ansor_mlir.database.records import Record, read_records
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.measure.builder import BuildInput, BuildResult, ProgramBuildInput
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.tuning.callbacks import TuningCallback
from ansor_mlir.tuning.task_result import STUCK_STREAK, TaskResult
from ansor_mlir.tuning.tuner import TuneOptions, Tuner


class CandidatesBreakIree(LocalBuilder):
    """IREE compiles every candidate's module with a line it cannot parse; the reference builds as usual."""

    def build_now(self, item: BuildInput | ProgramBuildInput) -> BuildResult:
        if isinstance(item, BuildInput) and (item.config is not None or item.strategy is not None):
            item = replace(item, flow_text=item.flow_text + "\n%broken = \n")
        return super().build_now(item)


class Notes(TuningCallback):
    def __init__(self) -> None:
        self.notes: list[str] = []

    def on_note(self, message: str) -> None:
        self.notes.append(message)


def _record(task_key: str, index: int, error: ErrorKind, message: str = "") -> Record:
    result = MeasureResult(error, median_s=1e-3 if error is ErrorKind.NONE else 0.0, message=message)
    return Record("llvm-cpu:host:t1", task_key, "t", Candidate(task_key, index, (index,)), None, None, 0, result, 0.0)


def test_a_streak_of_one_error_with_no_success_is_stuck():
    result = TaskResult(task=None)  # type: ignore[arg-type]
    result.account(_record("k", 0, ErrorKind.NONE))  # IREE's default: neither a success nor a failure here
    for i in range(1, STUCK_STREAK):
        result.account(_record("k", i, ErrorKind.INVALID_SCHEDULE, f"root op not found at {i}"))
    assert not result.stuck
    result.account(_record("k", STUCK_STREAK, ErrorKind.INVALID_SCHEDULE, "root op not found at 99"))
    assert result.stuck and result.streak_error == "invalid_schedule: root op not found at N"
    # Another error restarts the streak; one success anywhere means the failures are the sampling's luck.
    result.account(_record("k", 50, ErrorKind.COMPILE_ERROR, "stack allocation limit"))
    assert not result.stuck and result.streak == 1
    for i in range(60, 60 + STUCK_STREAK):
        result.account(_record("k", i, ErrorKind.COMPILE_ERROR, "stack allocation limit"))
    assert result.stuck
    result.account(_record("k", 80, ErrorKind.NONE))
    assert not result.stuck and result.successes == 1


def test_the_tuner_stops_a_stuck_task_and_says_why(tmp_path: Path):
    target = resolve_target(detect_host())
    log = tmp_path / "log.jsonl"
    options = TuneOptions(trials_per_task=40, log=log, seed=0, policy="random", progress=False, batch_size=4,
                          verify=0)
    notes = Notes()
    tuner = Tuner(target, options, callbacks=[notes], builder=CandidatesBreakIree(target))
    (result,) = tuner.tune_module(matmul_bias_relu(32, 32, 32), "mm")
    records = read_records(log)
    assert result.trials == len(records) < 40
    assert records[0].is_default and records[0].ok and not any(r.ok for r in records[1:])
    (stopped,) = [n for n in notes.notes if "stopped after" in n]
    assert f"the last {STUCK_STREAK}" in stopped and result.streak_error in stopped and str(log) in stopped
    assert result.stuck and "keeps IREE's default" in stopped, stopped

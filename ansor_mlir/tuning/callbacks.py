"""What the tuning loop tells the outside: progress bars, tables, logs of a run are callbacks.

The loop calls every callback at each event; a callback subclasses
`TuningCallback` and overrides the events it cares about (the rest do
nothing). Callbacks observe: they never change what is measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ansor_mlir.database.records import Record
from ansor_mlir.tuning.task_result import TaskResult


class TuningCallback(Protocol):
    def on_note(self, message: str) -> None:
        """Something the user should know that does not stop tuning (a task left untuned, and why)."""

    def on_start(self, results: Sequence[TaskResult], trials: int) -> None:
        """References measured and resumed logs read; `trials` candidates are left to measure in all."""

    def on_measured(self, results: Sequence[TaskResult], index: int, records: Sequence[Record]) -> None:
        """Records of task `index` were measured and appended to the log (each as its measurement completes,
        or another tuner's on a shared log); `results` are up to date."""

    def on_round(self, results: Sequence[TaskResult], index: int, left: int) -> None:
        """Task `index` finished a round (a batch); `left` trials remain in the run's budget.

        `task_result.estimated_latency(results)` is the model's estimated end-to-end latency now.
        """

    def on_task_done(self, result: TaskResult) -> None:
        """A task's budget is spent, or its search policy has nothing new to propose."""

    def on_end(self, results: Sequence[TaskResult]) -> None:
        """The search is over, finished or stopped by an error (called whenever `on_start` was)."""

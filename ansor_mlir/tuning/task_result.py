"""How tuning is going for one task: the state the loop keeps, the scheduler reads and the callbacks show."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ansor_mlir.core.task import Task
from ansor_mlir.database.records import Record


@dataclass
class TaskResult:
    """Trials and failures so far, IREE's default time and the best measured record."""

    task: Task
    default_s: float | None = None
    best_s: float | None = None
    best_record: Record | None = None
    trials: int = 0
    failures: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    # Whole-program verification: candidates checked, the best accepted program speedup, and whether
    # every checked candidate lost in the program (IREE's default is applied then).
    verified: int = 0
    program_speedup: float | None = None
    fell_back: bool = False
    # The record the tuned program applies, once verification decided it.
    applied_record: Record | None = None
    # The best time after each trial, in the order measured (inf before the first success): what the
    # task scheduler reads, and what a resumed run rebuilds from the log.
    best_history: list[float] = field(default_factory=list)

    @property
    def speedup(self) -> float | None:
        if self.default_s and self.best_s:
            return self.default_s / self.best_s
        return None

    def account(self, record: Record) -> None:
        """Count one measured record (this run's or a resumed log's)."""
        self.trials += 1
        if not record.ok:
            self.failures += 1
            kind = record.result.error.value
            self.errors[kind] = self.errors.get(kind, 0) + 1
        elif self.best_record is None or record.result.beats(self.best_record.result):
            self.best_s = record.result.median_s
            self.best_record = record
        self.best_history.append(self.best_s if self.best_s is not None else math.inf)


def estimated_latency(results: Sequence[TaskResult]) -> float | None:
    """The model's estimated end-to-end latency: the sum over tasks of weight x best time (None until every
    task has a time). It counts the tuned dispatches only, each timed alone."""
    if any(r.best_s is None for r in results):
        return None
    return sum(r.task.weight * r.best_s for r in results if r.best_s is not None)

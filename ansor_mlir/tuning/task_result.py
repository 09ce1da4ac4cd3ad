"""How tuning is going for one task: the state the loop keeps, the scheduler reads and the callbacks show."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ansor_mlir.core.task import Task
from ansor_mlir.database.records import Record

# A task whose candidates failed this many times in a row, all the same way, and never once succeeded, is
# stuck: a bug of its sketches (a builder error every candidate hits), not bad luck of the sampling.
STUCK_STREAK = 8


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
    # The record the tuned program applies, once verification decided it, and the task whose tuning-spec entry
    # configures this task's dispatch where that is another's (its root op matches; None: its own entry).
    applied_record: Record | None = None
    configured_by: Task | None = None
    # The best time after each trial, in the order measured (inf before the first success): what the
    # task scheduler reads, and what a resumed run rebuilds from the log.
    best_history: list[float] = field(default_factory=list)
    # Candidates (IREE's default aside) that ran correctly, and the run of the latest failures that share
    # one error (`failure_signature`).
    successes: int = 0
    streak: int = 0
    streak_error: str = ""

    @property
    def stuck(self) -> bool:
        """Every candidate so far failed, the last `STUCK_STREAK` of them the same way."""
        return self.successes == 0 and self.streak >= STUCK_STREAK

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
        if not record.is_default:
            self._count_streak(record)
        self.best_history.append(self.best_s if self.best_s is not None else math.inf)

    def _count_streak(self, record: Record) -> None:
        if record.ok:
            self.successes += 1
            self.streak, self.streak_error = 0, ""
            return
        error = failure_signature(record)
        self.streak = self.streak + 1 if error == self.streak_error else 1
        self.streak_error = error


def failure_signature(record: Record) -> str:
    """A failure's kind and first message line, numbers masked: the same bug at other tile sizes is one error."""
    lines = record.result.message.strip().splitlines()
    line = lines[0] if lines else ""
    return f"{record.result.error.value}: {re.sub(r'[0-9]+', 'N', line)[:200]}"


def estimated_latency(results: Sequence[TaskResult]) -> float | None:
    """The model's estimated end-to-end latency: the sum over tasks of weight x best time (None until every
    task has a time). It counts the tuned dispatches only, each timed alone."""
    if any(r.best_s is None for r in results):
        return None
    return sum(r.task.weight * r.best_s for r in results if r.best_s is not None)

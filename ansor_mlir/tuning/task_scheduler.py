"""Which task gets the next batch of measurements.

The tuning loop asks a `TaskScheduler` before every batch. Round-robin gives
every task its budget in turn; a scheduler that favours the tasks where time
is best spent (Ansor's gradient scheduler) plugs in behind the same method.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ansor_mlir.tuning.task_result import TaskResult


class TaskScheduler(Protocol):
    def next_task(self, results: Sequence[TaskResult], left: Sequence[int]) -> int | None:
        """The index of the task to measure next, or None to stop.

        `left[i]` is how many trials task `i` may still have; the loop sets it
        to 0 once the task's policy has nothing new to propose. A scheduler
        must never pick a task with nothing left.
        """
        ...


@dataclass
class RoundRobin:
    """Each task with trials left gets a batch in turn, in task order."""

    _last: int = -1

    def next_task(self, results: Sequence[TaskResult], left: Sequence[int]) -> int | None:
        count = len(left)
        for step in range(1, count + 1):
            index = (self._last + step) % count
            if left[index] > 0:
                self._last = index
                return index
        return None

"""How many trials a tuning run may measure: a model's total (the default) or a budget per task.

A total budget is shared by the tasks as the task scheduler sees fit; a
per-task budget gives each task the same number. Either way a task's trials
count IREE's default (measured first, for every task) and whatever other
tuners on a shared log measured; whole-program verification is set aside
from the budget per task. A time budget, where given, stops the search when
its wall-clock time is spent, whatever trials are left.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """Search trials: at most `per_task` for any one task, at most `total` for all together."""

    per_task: int
    total: int
    # Candidates per task set aside for whole-program verification (not part of per_task or total).
    verify: int = 0
    # When the search must stop (`time.monotonic()` seconds); None: when the trials are spent.
    deadline: float | None = None

    @staticmethod
    def for_run(tasks: int, trials: int, trials_per_task: int | None, verify: int,
                time_s: float | None = None) -> Budget:
        """`trials` in all (or `trials_per_task` each), less `verify` per task when what is left gives each task
        more than IREE's default (otherwise there would be nothing to verify); `time_s` seconds from now."""
        deadline = None if time_s is None else time.monotonic() + time_s
        if trials_per_task is not None:
            verify = verify if trials_per_task > verify + 1 else 0
            return Budget(trials_per_task - verify, tasks * (trials_per_task - verify), verify, deadline)
        verify = verify if trials > tasks * (verify + 1) else 0
        return Budget(trials - tasks * verify, trials - tasks * verify, verify, deadline)

    def expired(self) -> bool:
        """Whether the time budget is spent."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    def left(self, used: Sequence[int]) -> list[int]:
        """Per task, the trials it may still have, given what each has used (measured or claimed)."""
        room = self._room(used)
        return [min(room, max(0, self.per_task - u)) for u in used]

    def remaining(self, used: Sequence[int]) -> int:
        """Trials the whole run may still measure."""
        return min(self._room(used), sum(max(0, self.per_task - u) for u in used))

    def _room(self, used: Sequence[int]) -> int:
        # A task over its own budget (a log from a longer run) takes nothing from the others'.
        return max(0, self.total - sum(min(u, self.per_task) for u in used))

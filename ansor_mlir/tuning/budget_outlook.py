"""What a run's budget is, and what a larger one would be expected to bring.

A model's budget scales with its tasks: without `trials`, a run measures
`DEFAULT_TRIALS_PER_TASK` candidates per task in all (the gradient scheduler
shares them), or, with a time budget alone, goes on until the time is spent.
After the search, the scheduler's backward estimate of each task's progress
(the recent slope of its best time, as Ansor's gradient reads it) forecasts
the estimated end-to-end latency at twice the budget, so a user can tell a
budget-bound result from one that has converged. It is a forecast from the
slopes, not a measurement, and the console says so.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ansor_mlir.tuning.task_result import TaskResult, estimated_latency
from ansor_mlir.tuning.task_scheduler import GradientParams, TaskState, task_state

# Trials per task of a run that names no budget: enough for the gradient scheduler to move past the warm-up
# round of every task and spend the rest where the end-to-end latency is.
DEFAULT_TRIALS_PER_TASK = 64
# Rounds the recent slope is read over (the gradient scheduler's backward window).
BACKWARD_WINDOW = GradientParams().backward_window
# Per task, the trials a run with a time budget alone may take: the time runs out first.
TIME_BOUND_TRIALS_PER_TASK = 100_000


def scaled_trials(trials: int | None, time_budget: float | None, tasks: int) -> int:
    """The run's total trials: as given, or scaled to its `tasks` when none was given."""
    if trials is not None:
        return trials
    per_task = TIME_BOUND_TRIALS_PER_TASK if time_budget is not None else DEFAULT_TRIALS_PER_TASK
    return per_task * max(1, tasks)


def with_scaled_trials(options, tasks: int):
    """`options` (a `TuneOptions`) with its trials scaled to the program's `tasks` where it gave none."""
    if options.trials is not None or options.trials_per_task is not None:
        return options
    return dataclasses.replace(options, trials=scaled_trials(None, options.time_budget, tasks))


def budget_note(trials: int | None, trials_per_task: int | None, time_budget: float | None, tasks: int) -> str:
    """One line: the budget this run got, and where it came from."""
    plural = "" if tasks == 1 else "s"
    if trials_per_task is not None:
        spent = f"{trials_per_task} trials per task ({trials_per_task * tasks} for {tasks} task{plural})"
    elif trials is not None:
        spent = f"{trials} trials for {tasks} task{plural} ({trials / max(1, tasks):.0f} per task on average)"
    elif time_budget is None:
        spent = (f"{DEFAULT_TRIALS_PER_TASK * tasks} trials for {tasks} task{plural} (the default, "
                 f"{DEFAULT_TRIALS_PER_TASK} per task; set trials or a time budget to change it)")
    else:
        spent = f"as many trials for {tasks} task{plural} as fit in the time budget"
    if time_budget is not None:
        spent += f", stopping after {duration_text(time_budget)}"
    return f"budget: {spent}"


def duration_text(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.0f} s"


@dataclass(frozen=True)
class Outlook:
    """The estimated end-to-end latency now, and as the scheduler's slopes forecast it after `extra` trials."""

    trials: int
    estimate_s: float
    default_s: float
    extra: int
    forecast_s: float

    def note(self) -> str:
        gain = self.estimate_s / self.forecast_s if self.forecast_s > 0 else 1.0
        now = (f"estimated end-to-end {self.estimate_s * 1e3:.3f} ms after {self.trials} trials "
               f"(IREE's default {self.default_s * 1e3:.3f} ms, {self.default_s / self.estimate_s:.2f}x)")
        if gain < 1.02:
            return (f"{now}; the tasks' best times have stopped moving: twice the budget is forecast to bring "
                    "less than 2%")
        return (f"{now}; twice the budget ({self.trials + self.extra} trials) is forecast to bring about "
                f"{gain:.2f}x more ({self.forecast_s * 1e3:.3f} ms), from the task scheduler's slopes "
                "(a forecast, not a measurement)")


def recent_slope(state: TaskState, window: int) -> float:
    """How much the task's best time fell per round over its last `window` rounds (0 when it did not)."""
    span = min(window, len(state.history) - 1)
    if span < 1 or not all(math.isfinite(h) for h in state.history[-1 - span:]):
        return 0.0
    return max(0.0, (state.history[-1 - span] - state.history[-1]) / span)


def forecast(results: Sequence[TaskResult], batch: int, extra: int, window: int = BACKWARD_WINDOW) -> float | None:
    """The estimated end-to-end latency after `extra` more trials, as the scheduler's backward estimate sees it.

    Each task goes on falling at its recent slope, decaying as 1/rounds (a search's gains shrink as it goes on),
    and never below half of its best time now; each round of `batch` trials goes to the task whose next round
    is forecast to save the most end-to-end time, as the gradient scheduler sends it. None until every task has
    a time."""
    if not results or estimated_latency(results) is None:
        return None
    states = [task_state(r.best_history, batch) for r in results]
    weights = [r.task.weight for r in results]
    slopes = [recent_slope(s, window) for s in states]
    best = [s.best for s in states]
    floors = [0.5 * b for b in best]
    extra_rounds = [0] * len(results)

    def saving(i: int) -> float:
        rounds = max(1, states[i].rounds)
        step = slopes[i] * rounds / (rounds + extra_rounds[i] + 1)
        return weights[i] * min(step, best[i] - floors[i])

    for _ in range(max(0, extra) // max(1, batch)):
        index = max(range(len(results)), key=saving)
        gain = saving(index)
        if gain <= 0:
            break
        best[index] -= gain / weights[index]
        extra_rounds[index] += 1
    return sum(w * b for w, b in zip(weights, best, strict=True))


def outlook(results: Sequence[TaskResult], batch: int) -> Outlook | None:
    """Now and at twice the trials measured; None for a run without a time for every task."""
    estimate = estimated_latency(results)
    if estimate is None or any(r.default_s is None for r in results):
        return None
    trials = sum(r.trials for r in results)
    predicted = forecast(results, batch, trials)
    if predicted is None:
        return None
    default = sum(r.task.weight * r.default_s for r in results if r.default_s is not None)
    return Outlook(trials, estimate, default, trials, min(predicted, estimate))

"""A threaded search that starts on one thread: part of the budget is measured on one thread, where timings hold
still, and the best candidates found there open the threaded search (`tuning.thread_seeds`).

On a shared 2-vCPU guest the host's phases move one 2-thread program's time
within seconds, and so the anchor each batch is timed against. Tuned at 2
threads from an empty log, a search follows those phases: a batch timed
beside a slow anchor puts one kind of register tile on top, the cost model
learns it, and most later candidates are of that kind, while the kernel a
1-thread search finds runs faster at 2 threads too
(measured: docs/reports/measurement_fidelity.md). A register tile, its
packing and its cache blocking suit one core whatever the number of
workers; what the workers change is mostly the distribution,
which the threaded trials then tune. The one-thread records are this
machine's records at 1 thread, applied at 1 thread like any others; the
threaded run never uses their times, only their candidates.
"""

from __future__ import annotations

import dataclasses

from ansor_mlir.core.target import Target
from ansor_mlir.tuning.tuner import TuneOptions

# Neither phase runs with fewer trials per task than this: IREE's default is one of each phase's trials, and a
# threaded phase of a few trials would be spent on the seeds alone.
MIN_PHASE_TRIALS = 8


@dataclasses.dataclass(frozen=True)
class OneThreadStart:
    """The two phases of a threaded run: the one-thread target and options, then the threaded run's options."""

    target: Target
    first: TuneOptions
    rest: TuneOptions

    def note(self, threads: int) -> str:
        per_task = self.first.trials_per_task is not None
        first = self.first.trials_per_task if per_task else self.first.trials
        rest = self.rest.trials_per_task if per_task else self.rest.trials
        return (f"threads={threads}: the first {first} trials{' of each task' * per_task} are measured on one thread, "
                f"where timings hold still; their best candidates open the {rest} trials at {threads} threads")


def split_trials(total: int, share: float, tasks: int = 1) -> tuple[int, int] | None:
    """(one-thread trials, threaded trials) of `total` shared by `tasks` tasks, or None when either phase would
    get fewer than `MIN_PHASE_TRIALS` per task."""
    first = round(total * share)
    return (first, total - first) if min(first, total - first) >= MIN_PHASE_TRIALS * tasks else None


def one_thread_start(target: Target, options: TuneOptions, tasks: int) -> OneThreadStart | None:
    """The phases of a run of `tasks` tasks at `target.threads` > 1 with `options.one_thread_share` of its trials
    on one thread; None when the run is single-threaded, has no share, or has too few trials per task to split.
    The first phase checks no whole program (`verify=0`): its candidates are checked, if they win, at the
    threaded count."""
    if target.threads <= 1 or options.one_thread_share <= 0:
        return None
    per_task = options.trials_per_task is not None
    total = options.trials_per_task if per_task else options.trials
    split = split_trials(total, options.one_thread_share, 1 if per_task else max(1, tasks))
    if split is None:
        return None
    first, rest = split
    budget = "trials_per_task" if per_task else "trials"
    return OneThreadStart(
        dataclasses.replace(target, threads=1),
        dataclasses.replace(options, **{budget: first}, verify=0, one_thread_share=0.0),
        dataclasses.replace(options, **{budget: rest}),
    )

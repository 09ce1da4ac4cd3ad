"""The console view of a tuning run: notes, a live progress bar over the run's budget, a table after each
round of a multi-task run (the task scheduler's view), and the results table at the end."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from ansor_mlir.database.records import Record
from ansor_mlir.tuning.callbacks import TuningCallback
from ansor_mlir.tuning.task_result import TaskResult, estimated_latency


def stderr_console() -> Console:
    return Console(stderr=True, width=None if sys.stderr.isatty() else 140)


class ConsoleProgress(TuningCallback):
    """Notes always; with `progress`, the bar while tuning and the results table after."""

    def __init__(self, console: Console | None = None, progress: bool = True):
        self.console = console or stderr_console()
        self.progress = progress
        self._bar: Progress | None = None
        self._bar_task: TaskID | None = None

    def on_note(self, message: str) -> None:
        self.console.print(f"[yellow]note[/]: {message}")

    def on_start(self, results: Sequence[TaskResult], trials: int) -> None:
        if not self.progress:
            return
        self._bar = Progress(
            TextColumn("[bold]tuning"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=self.console,
        )
        self._bar.start()
        self._bar_task = self._bar.add_task(status(results), total=trials)

    def on_measured(self, results: Sequence[TaskResult], index: int, records: Sequence[Record]) -> None:
        if self._bar is not None and self._bar_task is not None:
            self._bar.update(self._bar_task, advance=len(records), description=status(results))

    def on_round(self, results: Sequence[TaskResult], index: int, left: int) -> None:
        if self._bar is not None and len(results) > 1:
            self.console.print(round_table(results, index, left))

    def on_end(self, results: Sequence[TaskResult]) -> None:
        if self._bar is None:
            return
        self._bar.stop()
        self._bar = self._bar_task = None
        self.console.print(results_table(results))


def status(results: Sequence[TaskResult]) -> str:
    """One line: trials, failures, each task's best time, geometric-mean speedup over IREE's default."""
    trials = sum(r.trials for r in results)
    failures = sum(r.failures for r in results)
    speedups = [r.speedup for r in results if r.speedup]
    best = " ".join(f"{r.task.name.split('_dispatch')[0]}={r.best_s * 1e3:.3f}ms" for r in results if r.best_s)
    geo = float(np.exp(np.mean(np.log(speedups)))) if speedups else 1.0
    if len(results) > 1:
        estimate = estimated_latency(results)
        shown = f"{estimate * 1e3:.3f} ms" if estimate is not None else "-"
        return f"trials {trials} failed {failures} estimated end-to-end {shown} speedup {geo:.2f}x"
    return f"trials {trials} failed {failures} best {best} speedup {geo:.2f}x"


def round_table(results: Sequence[TaskResult], index: int, left: int) -> Table:
    """The task scheduler's view after a round: per task its trials, best time, weight and share of the
    estimated end-to-end latency (the sum of weight x best time), which the caption gives."""
    estimate = estimated_latency(results)
    shown = f"{estimate * 1e3:.3f} ms" if estimate is not None else "-"
    table = Table(title=f"after a round of task {index}: estimated end-to-end latency {shown}",
                  caption=f"trials {sum(r.trials for r in results)}, {left} left")
    for column in ("#", "task", "trials", "best", "weight", "weight x best", "share"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for i, r in enumerate(results):
        weighted = r.task.weight * r.best_s if r.best_s is not None else None
        table.add_row(
            f"{'*' if i == index else ''}{i}",
            r.task.name,
            str(r.trials),
            f"{r.best_s * 1e3:.3f} ms" if r.best_s is not None else "-",
            str(r.task.weight),
            f"{weighted * 1e3:.3f} ms" if weighted is not None else "-",
            f"{weighted / estimate:.0%}" if weighted is not None and estimate else "-",
        )
    return table


def results_table(results: Sequence[TaskResult]) -> Table:
    """Per task: the log's speedup (the task timed alone) beside the program's (the whole program timed
    with the task's choice against without it, the other tasks' choices in both) and what is applied."""
    table = Table(title="ansor-mlir tuning results")
    for column in ("task", "weight", "GFLOP", "trials", "failed", "IREE default", "tuned", "speedup (log)",
                   "speedup (program)", "applied"):
        table.add_column(column, justify="right" if column != "task" else "left")
    for r in results:
        table.add_row(
            r.task.name,
            str(r.task.weight),
            f"{r.task.flops / 1e9:.3f}",
            str(r.trials),
            str(r.failures),
            f"{r.default_s * 1e3:.3f} ms" if r.default_s else "-",
            f"{r.best_s * 1e3:.3f} ms" if r.best_s else "-",
            f"{r.speedup:.2f}x" if r.speedup else "-",
            f"{r.program_speedup:.2f}x" if r.program_speedup else "-",
            applied(r),
        )
    return table


def applied(result: TaskResult) -> str:
    """What the tuned program uses for the task, and why."""
    best = result.applied_record or result.best_record
    if result.configured_by is not None:
        return f"{result.configured_by.name}'s choice (same root op: its spec entry matches this dispatch)"
    if result.fell_back:
        return f"IREE default ({result.verified} checked, none faster in the program)"
    if best is None or best.is_default:
        return f"IREE default ({why_default(result)})"
    sketch = f"s{best.candidate.sketch_index} {'+'.join(best.rules)}"
    return f"{sketch} (program-checked)" if result.program_speedup else f"{sketch} (log)"


def why_default(result: TaskResult) -> str:
    """Why a task's best is IREE's own configuration: nothing searched, every candidate failed, or none faster."""
    candidates = max(result.trials - 1, 0)  # the first record of a task is IREE's default, its reference
    if not result.task.tunable:
        return "no sketch applies to this dispatch"
    if candidates == 0:
        return "no candidate measured: raise --trials"
    if result.successes == 0:
        common = max(result.errors, key=result.errors.get) if result.errors else "error"
        return f"all {candidates} candidates failed, most with {common}"
    return f"none of {candidates} candidates faster"

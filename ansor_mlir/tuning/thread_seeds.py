"""Seeds from other thread counts: a task's best candidates measured on this CPU at another thread count,
measured first when tuning at this one.

A register tile, its packing and its cache blocking suit a core whatever
the number of workers; only the distribution over workers changes. Tuned
at 2 threads on a 2-vCPU guest, where the host's phases move one program's
time within seconds, a search can settle on tiles that win only in the
phases they were timed in, while the kernel the 1-thread search found runs
faster at 2 threads too (measured: docs/reports/measurement_fidelity.md). So
when the log holds the task's records for the same machine at another thread
count, their best correct candidates open this run's search: measured here,
at this thread count, counted toward the budget like any other trial, never
applied on the other count's times. A seed whose workgroups do not share out
evenly over this run's threads comes with its nearest variants that do
(`balanced`): workgroups that do not divide among the workers leave one
worker idle for part of every call.
"""

from __future__ import annotations

from collections.abc import Sequence

from ansor_mlir.core.schedule import Candidate, Sketch, tile_knobs
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.database.records import Record, task_history
from ansor_mlir.search.shape_neighbours import distance
from ansor_mlir.space.annotation import divisors, is_valid, with_tile
from ansor_mlir.space.resolve import resolve

DISTRIBUTION = "distribution"
# Balanced variants offered per seed (nearest first).
BALANCED_VARIANTS = 2


def without_threads(key: str) -> str:
    """A target key or fingerprint without its thread count (`llvm-cpu:znver3:ab12:t2` -> `llvm-cpu:znver3:ab12`)."""
    head, sep, tail = key.rpartition(":t")
    return head if sep and tail.isdigit() else key


def other_thread_counts(records: Sequence[Record], target: Target) -> list[tuple[str, str]]:
    """(target key, fingerprint) of each other thread count on this machine that `records` hold."""
    key, fingerprint = without_threads(target.key), without_threads(target.fingerprint)
    found = {(r.target, r.fingerprint) for r in records
             if r.target != target.key and without_threads(r.target) == key
             and r.fingerprint and without_threads(r.fingerprint) == fingerprint}
    return sorted(found)


def thread_seeds(records: Sequence[Record], target: Target, task: Task, sketches: list[Sketch],
                 count: int) -> list[Candidate]:
    """Up to `count` distinct candidates, fastest first, that ran correctly for `task` at another thread count
    on this machine and are valid for `target` (IREE's default excluded: every run measures it anyway)."""
    if count <= 0:
        return []
    history = [r for key, fingerprint in other_thread_counts(records, target)
               for r in task_history(list(records), key, task.key, sketches, fingerprint)]
    timed = sorted((r for r in history if r.result.ok and r.result.median_s and r.candidate.sketch_index > 0),
                   key=lambda r: r.result.median_s)
    by_index = {s.index: s for s in sketches}
    seeds: dict[str, Candidate] = {}
    for record in timed:
        candidate = record.candidate
        sketch = by_index[candidate.sketch_index]
        if candidate.identity in seeds or not is_valid(sketch, dict(candidate.values), task, target):
            continue
        for seed in (candidate, *balanced(candidate, sketch, task, target)):
            seeds.setdefault(seed.identity, seed)
        if len(seeds) >= count:
            break
    return list(seeds.values())[:count]


def workgroups(candidate: Candidate, sketch: Sketch, task: Task) -> int:
    """How many workgroups the candidate's distribution tiles make."""
    return resolve(sketch, candidate, task).workgroups


def balanced(candidate: Candidate, sketch: Sketch, task: Task, target: Target) -> list[Candidate]:
    """Up to `BALANCED_VARIANTS` valid variants of `candidate`, nearest first, whose workgroup count is a multiple
    of the target's threads, one distribution tile changed; none when it already is or for one thread."""
    if target.threads <= 1 or workgroups(candidate, sketch, task) % target.threads == 0:
        return []
    values = dict(candidate.values)
    options = []
    for knob in tile_knobs(sketch.knobs):
        if not knob.levels or knob.levels[0] != DISTRIBUTION or knob.padded:
            continue
        old = values[knob.name]
        for size in divisors(knob.outer_bound):
            if size == old[0]:
                continue
            trial = Candidate(candidate.task_key, candidate.sketch_index,
                              tuple(sorted({**values, knob.name: with_tile(old, 0, size)}.items())))
            options.append((distance((size,), old[:1]), trial))
    out: list[Candidate] = []
    for _, trial in sorted(options, key=lambda item: item[0]):
        if workgroups(trial, sketch, task) % target.threads == 0 and is_valid(sketch, dict(trial.values), task, target):
            out.append(trial)
            if len(out) == BALANCED_VARIANTS:
                break
    return out

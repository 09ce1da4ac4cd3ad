"""Questions asked of a log's records: which record each task applies, a task's history, its fastest
measurements, and a program's latest choice. Pure functions of the records, so every `Database` answers
them the same way."""

from __future__ import annotations

from dataclasses import replace

from ansor_mlir.core.measure_result import ErrorKind
from ansor_mlir.core.schedule import Sketch
from ansor_mlir.database.measure_record import Record
from ansor_mlir.database.program_record import ProgramRecord
from ansor_mlir.database.schema_upgrade import upgrade_legacy


def for_target(record: Record, target_key: str, fingerprint: str = "") -> bool:
    """A record applies to a target when the keys match and, where both are known, so do the machines: a log
    tuned on one CPU is not applied on another that answers the same request (`cpu=host`)."""
    return record.target == target_key and (not fingerprint or not record.fingerprint
                                            or record.fingerprint == fingerprint)


def is_search_record(record: Record) -> bool:
    """A task measurement made by the search: neither a whole-program check nor a cost-model pick."""
    return record.program is None and record.result.error != ErrorKind.NOT_MEASURED


def best_records(records: list[Record], target_key: str, fingerprint: str = "") -> dict[str, Record]:
    """The record to apply per task for one target (and machine, `for_target`); others are ignored.

    A task whose candidates were checked in the whole program gets its
    accepted candidate with the best program speedup, or, when the program
    rejected them all, IREE's default (its sketch-zero record): what the
    program measured beats what the task measured. Otherwise the fastest
    correct task measurement; a task with none falls back to its latest
    zero-trial pick (chosen by the cost model alone), so a measurement always
    wins over a guess.
    """
    best: dict[str, Record] = {}
    guesses: dict[str, Record] = {}
    defaults: dict[str, Record] = {}
    checked: dict[str, dict[str, Record]] = {}
    for record in records:
        if not for_target(record, target_key, fingerprint):
            continue
        if record.program is not None:
            checked.setdefault(record.task_key, {})[record.candidate.identity] = record  # the latest check counts
            continue
        if record.result.error == ErrorKind.NOT_MEASURED:
            guesses[record.task_key] = record
            continue
        if not record.ok:
            continue
        if record.is_default:
            defaults.setdefault(record.task_key, record)
        current = best.get(record.task_key)
        if current is None or record.result.beats(current.result):
            best[record.task_key] = record
    for task_key, checks in checked.items():
        accepted = [r for r in checks.values() if r.program.accepted]
        if accepted:
            best[task_key] = max(accepted, key=lambda r: r.program.ratio)
        elif task_key in defaults:
            best[task_key] = defaults[task_key]
    return {**guesses, **best}


def top_k(records: list[Record], target_key: str, task_key: str, k: int, fingerprint: str = "") -> list[Record]:
    """A task's `k` fastest correct measurements for one target (and machine), fastest median first (log order
    among equals); whole-program checks and cost-model picks are not measurements of the task."""
    measured = [r for r in records if r.task_key == task_key and for_target(r, target_key, fingerprint)
                and is_search_record(r) and r.ok]
    return sorted(measured, key=lambda r: r.result.median_s)[:max(k, 0)]


def task_history(
    records: list[Record], target_key: str, task_key: str, sketches: list[Sketch], fingerprint: str = ""
) -> list[Record]:
    """A task's measured records for one target, replayed onto this run's sketches.

    Each record is matched to the sketch with the same trace (by digest), so
    its candidate carries that sketch's index here; a record whose trace this
    run does not derive keeps index -1 (it still counts as measured and can
    still be the best, since its own trace rebuilds it).
    """
    by_digest = {s.digest: s.index for s in sketches}
    mine = [r for r in records if for_target(r, target_key, fingerprint) and r.task_key == task_key
            and is_search_record(r)]
    out = []
    for record in upgrade_legacy(mine, task_key, sketches):
        index = by_digest.get(record.sketch.digest, -1)
        out.append(replace(record, candidate=replace(record.candidate, sketch_index=index)))
    return out


def program_choice(records: list[ProgramRecord], program: str, rewrites: tuple[str, ...], target_key: str,
                   fingerprint: str) -> ProgramRecord | None:
    """The latest program record of a program, tuned with `rewrites`, on this machine (None: no choice made)."""
    mine = [r for r in records if (r.program, r.rewrites, r.target, r.fingerprint)
            == (program, rewrites, target_key, fingerprint)]
    return max(mine, key=lambda r: r.timestamp, default=None)

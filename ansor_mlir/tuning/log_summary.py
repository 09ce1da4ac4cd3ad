"""What a tuning log holds, per target and task: a summary to read, and a distilled log to keep.

The summary gives each task's trials, failures by kind, best time and speedup over IREE's default. The
distilled log keeps only what applying the log needs (TVM's `measure_record --mode distill`): per target,
machine and task the record `best_records` applies, and the latest program-level choice of each program
(`tuning.program_choice`), so `apply_best`, the spec and `compile` build from it what they build from the whole.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ansor_mlir.core.measure_result import ErrorKind
from ansor_mlir.database.records import (
    ProgramLine,
    ProgramRecord,
    Record,
    SchemaError,
    best_records,
    parse_line,
    program_record_from_dict,
    read_records,
)
from ansor_mlir.errors import AnsorError


@dataclass(frozen=True)
class TaskSummary:
    """One task of one target in a log."""

    target: str
    fingerprint: str
    task: str
    trials: int
    failures: dict[str, int] = field(default_factory=dict)
    best_s: float | None = None
    default_s: float | None = None
    # What the log applies: IREE's default, the best sketch's rules, or a cost-model pick.
    applied: str = ""

    @property
    def speedup(self) -> float | None:
        return self.default_s / self.best_s if self.best_s and self.default_s else None

    def to_dict(self) -> dict:
        return {"target": self.target, "fingerprint": self.fingerprint, "task": self.task, "trials": self.trials,
                "failures": self.failures, "best_s": self.best_s, "default_s": self.default_s,
                "speedup": self.speedup, "applied": self.applied}


def read_log(path: Path) -> list[Record]:
    if not path.is_file():
        raise AnsorError(f"{path}: no such tuning log")
    return read_records(path)


def machines(records: list[Record]) -> list[tuple[str, str]]:
    """The (target, machine fingerprint) pairs of a log, in first-seen order."""
    return list(dict.fromkeys((r.target, r.fingerprint) for r in records))


def summarize_log(path: Path) -> list[TaskSummary]:
    """Per target, machine and task (in first-seen order): what was measured and what the log applies."""
    records = read_log(path)
    out = []
    for target, fingerprint in machines(records):
        mine = [r for r in records if (r.target, r.fingerprint) == (target, fingerprint)]
        best = best_records(mine, target, fingerprint)
        for key in dict.fromkeys(r.task_key for r in mine):
            searched = [r for r in mine if r.task_key == key and r.program is None]
            failures = Counter(r.result.error.value for r in searched
                               if not r.ok and r.result.error is not ErrorKind.NOT_MEASURED)
            defaults = [r.result.median_s for r in searched if r.is_default and r.ok]
            chosen = best.get(key)
            measured = chosen is not None and chosen.ok
            out.append(TaskSummary(target, fingerprint, (searched or mine)[0].task_name, len(searched),
                                   dict(sorted(failures.items())), chosen.result.median_s if measured else None,
                                   min(defaults) if defaults else None, applied(chosen)))
    return out


def applied(record: Record | None) -> str:
    if record is None:
        return "-"
    if record.result.error is ErrorKind.NOT_MEASURED:
        return "cost-model pick (not measured)"
    if record.is_default:
        return "IREE default"
    checked = " (program-checked)" if record.program is not None else ""
    return f"sketch {record.candidate.sketch_index} {'+'.join(record.rules)}{checked}"


def summary_table(rows: list[TaskSummary]) -> str:
    """A table per target and machine: task, trials, failures by kind, best, IREE default, speedup, applied."""
    lines: list[str] = []
    header = ("task", "trials", "failed", "best", "IREE default", "speedup", "applied")
    for target, fingerprint in dict.fromkeys((r.target, r.fingerprint) for r in rows):
        cells = [header] + [(r.task, str(r.trials), _failures(r.failures), _ms(r.best_s), _ms(r.default_s),
                             f"{r.speedup:.2f}x" if r.speedup else "-", r.applied)
                            for r in rows if (r.target, r.fingerprint) == (target, fingerprint)]
        widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
        lines.append(f"{target}" + (f" ({fingerprint})" if fingerprint else "") + ":")
        lines += ["  " + "  ".join(cell.ljust(w) if i in (0, 2, 6) else cell.rjust(w)
                                   for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip()
                  for row in cells]
    return "\n".join(lines) + "\n"


def _failures(failures: dict[str, int]) -> str:
    return ", ".join(f"{count} {kind}" for kind, count in failures.items()) or "0"


def _ms(seconds: float | None) -> str:
    return f"{seconds * 1e3:.4g} ms" if seconds else "-"


@dataclass(frozen=True)
class Distilled:
    path: Path
    records: int
    choices: int
    tasks: int


def distill_log(path: Path, out: Path) -> Distilled:
    """Write to `out` (a new file) the lines of the best record of every task per target and machine, and of the
    latest program-level choice of every program per target and machine, as they are in the log (a record of an
    older schema stays as it was written, to be upgraded where it is applied)."""
    if out.exists():
        raise AnsorError(f"{out}: exists; distill writes a new log (remove it, or name another file)")
    if not out.absolute().parent.is_dir():
        raise AnsorError(f"{out}: directory {out.parent} does not exist")
    read_log(path)  # checks the file, and warns once of each line it skips
    records, choices = log_lines(path)
    kept: list[tuple[bytes, Record]] = []
    for target, fingerprint in machines([r for _, r in records]):
        mine = [(line, r) for line, r in records if (r.target, r.fingerprint) == (target, fingerprint)]
        chosen = {id(r) for r in best_records([r for _, r in mine], target, fingerprint).values()}
        kept += [(line, r) for line, r in mine if id(r) in chosen]
    latest = {id(r) for r in latest_choices([r for _, r in choices])}
    lines = [line for line, _ in kept] + [line for line, r in choices if id(r) in latest]
    try:
        out.write_bytes(b"".join(line + b"\n" for line in lines))
    except OSError as exc:
        raise AnsorError(f"{out}: cannot write: {exc.strerror or exc}") from None
    return Distilled(out, len(kept), len(latest), len({(r.target, r.fingerprint, r.task_key) for _, r in kept}))


def log_lines(path: Path) -> tuple[list[tuple[bytes, Record]], list[tuple[bytes, ProgramRecord]]]:
    """Each readable line of a log with its record: the measurement records, and the program records."""
    records, choices = [], []
    for line in path.read_bytes().splitlines():
        try:
            records.append((line, parse_line(line)))
        except ProgramLine:
            try:
                choices.append((line, program_record_from_dict(json.loads(line))))
            except (ValueError, RecursionError):
                continue  # read_program_records warns of it where the log is applied
        except SchemaError:
            continue  # `read_records` warned of it
    return records, choices


def latest_choices(records: list[ProgramRecord]) -> list[ProgramRecord]:
    """The latest choice of each program, tuned with its rewrites, per target and machine."""
    latest: dict[tuple, ProgramRecord] = {}
    for record in records:
        key = (record.program, record.rewrites, record.target, record.fingerprint)
        if key not in latest or record.timestamp >= latest[key].timestamp:
            latest[key] = record
    return list(latest.values())

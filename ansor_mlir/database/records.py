"""The tuning log: append-only JSON lines, one measured candidate per line.

Lines are only ever appended (flushed and fsynced per measured batch), never
rewritten, so a killed run loses nothing it had recorded and a rerun with the
same log resumes where it stopped. A corrupt line is skipped with a warning
naming its line number; the file itself is left untouched.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.schedule import Candidate, Family, Sketch
from ansor_mlir.core.task import IreeConfig
from ansor_mlir.errors import AnsorError
from ansor_mlir.model.features import FEATURE_VERSION

# Version 3 records carry the whole schedule trace, so they replay without the rule list that derived them,
# and the versions that made them. Version 2 (sketch index + rule names) and 1 are read and upgraded against
# the task's sketches (`upgrade_legacy`).
FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)


def producer_versions() -> tuple[tuple[str, str], ...]:
    """What made a record: the record schema, ansor-mlir, IREE's compiler and the feature set."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "unknown"

    return (("ansor_mlir", installed("ansor-mlir")), ("features", str(FEATURE_VERSION)),
            ("iree", installed("iree-base-compiler")), ("schema", str(FORMAT_VERSION)))


@dataclass(frozen=True)
class ProgramCheck:
    """The user's whole program built with one task's candidate, timed alternately against IREE's default
    build of the same program: per-round speedups (default / tuned), their quartiles, and the verdict."""

    default_s: float
    tuned_s: float
    ratio_low: float
    ratio: float
    ratio_high: float
    rounds: int
    accepted: bool
    reason: str = ""

    def to_dict(self) -> dict:
        return {"default_s": self.default_s, "tuned_s": self.tuned_s, "ratio_low": self.ratio_low,
                "ratio": self.ratio, "ratio_high": self.ratio_high, "rounds": self.rounds,
                "accepted": self.accepted, "reason": self.reason}

    @staticmethod
    def from_dict(data: dict) -> ProgramCheck:
        return ProgramCheck(float(data["default_s"]), float(data["tuned_s"]), float(data["ratio_low"]),
                            float(data["ratio"]), float(data["ratio_high"]), int(data["rounds"]),
                            bool(data["accepted"]), str(data.get("reason", "")))


@dataclass(frozen=True)
class Record:
    """One measured candidate: what was built (its trace and decisions), for which target, and how it did.

    `sketch` is None only for a record of an older schema whose trace is not
    known until it is upgraded against the task's sketches (`upgrade_legacy`).
    """

    target: str
    task_key: str
    task_name: str
    candidate: Candidate
    sketch: Sketch | None
    config: IreeConfig
    root_index: int
    result: MeasureResult
    timestamp: float
    versions: tuple[tuple[str, str], ...] = ()
    # The machine it was measured for (`Target.fingerprint`: resolved CPU, features, threads); "" when unknown.
    fingerprint: str = ""
    # Older schemas: the rules and family that derived the sketch at `candidate.sketch_index`.
    legacy_rules: tuple[str, ...] = ()
    legacy_family: Family = Family.PIPELINE
    # Set on a verification record: the candidate's task measurement (`result`) checked in the whole program.
    program: ProgramCheck | None = None

    @property
    def family(self) -> Family:
        return self.sketch.family if self.sketch else self.legacy_family

    @property
    def rules(self) -> tuple[str, ...]:
        return self.sketch.rules if self.sketch else self.legacy_rules

    @property
    def is_default(self) -> bool:
        """IREE's own configuration (sketch zero in every schema)."""
        return self.sketch.is_default if self.sketch else self.candidate.sketch_index == 0

    def to_json(self) -> str:
        if self.sketch is None:
            raise ValueError("a legacy record is written only after upgrade_legacy gave it its trace")
        return json.dumps(
            {
                "version": FORMAT_VERSION,
                "target": self.target,
                "task": self.task_key,
                "task_name": self.task_name,
                "sketch": {"index": self.candidate.sketch_index, "rules": list(self.sketch.rules),
                           "trace": self.sketch.trace()},
                "values": {k: list(v) for k, v in self.candidate.values},
                "config": self.config.to_dict(),
                "root_index": self.root_index,
                "result": self.result.to_dict(),
                "timestamp": round(self.timestamp, 3),
                "versions": dict(self.versions),
                "fingerprint": self.fingerprint,
                **({"program": self.program.to_dict()} if self.program else {}),
            },
            sort_keys=True,
        )

    @staticmethod
    def from_json(line: str) -> Record:
        data = json.loads(line)
        version = data.get("version")
        if version not in READABLE_VERSIONS:
            raise ValueError(f"record version {version!r} is not one of {READABLE_VERSIONS}: written by a newer "
                             "ansor-mlir? upgrade, or tune again with a fresh log")
        candidate = Candidate.from_dict(
            {"task": data["task"], "sketch": data["sketch"]["index"], "values": data["values"]}
        )
        rules = tuple(str(r) for r in data["sketch"].get("rules", ()))
        trace = data["sketch"].get("trace") if version >= 3 else None
        sketch = Sketch.from_trace(trace, str(data["task"]), candidate.sketch_index, rules) if trace else None
        return Record(
            target=str(data["target"]),
            task_key=str(data["task"]),
            task_name=str(data.get("task_name", "")),
            candidate=candidate,
            sketch=sketch,
            config=IreeConfig.from_dict(data["config"]),
            root_index=int(data["root_index"]),
            result=MeasureResult.from_dict(data["result"]),
            timestamp=float(data["timestamp"]),
            versions=tuple(sorted((str(k), str(v)) for k, v in data.get("versions", {}).items())),
            fingerprint=str(data.get("fingerprint", "")),
            program=ProgramCheck.from_dict(data["program"]) if data.get("program") else None,
            legacy_rules=rules if sketch is None else (),
            legacy_family=Family(data["sketch"].get("family", Family.PIPELINE.value)),
        )

    @property
    def ok(self) -> bool:
        return self.result.error == ErrorKind.NONE and self.result.median_s is not None


def upgrade_legacy(records: list[Record], task_key: str, sketches: list[Sketch]) -> list[Record]:
    """Records of one task with their traces: older-schema ones get the sketch at their index among
    `sketches` (derived by the version-2 rule list, which `cpu_rules` still is), when its rules match; a
    record naming a sketch this version does not derive is dropped with a warning."""
    out = []
    for record in records:
        if record.task_key != task_key:
            continue
        if record.sketch is None:
            index = record.candidate.sketch_index
            sketch = sketches[index] if 0 <= index < len(sketches) else None
            if sketch is None or sketch.rules != record.legacy_rules or sketch.family != record.legacy_family:
                warnings.warn(f"tuning log: a {record.legacy_family.value} record of task {record.task_name} names "
                              f"sketch {index} ({'+'.join(record.legacy_rules)}), which this version does not "
                              "derive: ignored", stacklevel=2)
                continue
            record = replace(record, sketch=sketch, legacy_rules=())
        out.append(record)
    return out


def for_target(record: Record, target_key: str, fingerprint: str = "") -> bool:
    """A record applies to a target when the keys match and, where both are known, so do the machines: a log
    tuned on one CPU is not applied on another that answers the same request (`cpu=host`)."""
    return record.target == target_key and (not fingerprint or not record.fingerprint
                                            or record.fingerprint == fingerprint)


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
            and r.result.error != ErrorKind.NOT_MEASURED and r.program is None]
    out = []
    for record in upgrade_legacy(mine, task_key, sketches):
        index = by_digest.get(record.sketch.digest, -1)
        out.append(replace(record, candidate=replace(record.candidate, sketch_index=index)))
    return out


def read_records(path: Path) -> list[Record]:
    """All readable records of a log; corrupt lines are skipped with a warning."""
    if not path.exists():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AnsorError(f"cannot read tuning log {path}: {exc}") from None
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(Record.from_json(line))
        except (ValueError, KeyError, TypeError) as exc:
            warnings.warn(f"{path}:{number}: skipping corrupt record ({exc})", stacklevel=2)
    return records


def append_records(path: Path, records: list[Record]) -> None:
    """Append a measured batch and make it durable before returning."""
    if not records:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            if f.tell() > 0 and not _ends_with_newline(path):
                f.write("\n")
            for record in records:
                f.write(record.to_json() + "\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise AnsorError(f"cannot write tuning log {path}: {exc}") from None


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


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


def now() -> float:
    return time.time()

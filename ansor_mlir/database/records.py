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
from dataclasses import dataclass
from pathlib import Path

from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.schedule import PIPELINE_FAMILY, Candidate
from ansor_mlir.core.task import IreeConfig
from ansor_mlir.errors import AnsorError

# Version 2 adds the sketch family; version-1 logs (pipeline family only) still read.
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)


@dataclass(frozen=True)
class Record:
    """One measured candidate: what was built, for which target, and how it did."""

    target: str
    task_key: str
    task_name: str
    candidate: Candidate
    pipeline: str
    rules: tuple[str, ...]
    config: IreeConfig
    root_index: int
    result: MeasureResult
    timestamp: float
    family: str = PIPELINE_FAMILY

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": FORMAT_VERSION,
                "target": self.target,
                "task": self.task_key,
                "task_name": self.task_name,
                "sketch": {"index": self.candidate.sketch_index, "pipeline": self.pipeline,
                           "rules": list(self.rules), "family": self.family},
                "values": {k: list(v) for k, v in self.candidate.values},
                "config": self.config.to_dict(),
                "root_index": self.root_index,
                "result": self.result.to_dict(),
                "timestamp": round(self.timestamp, 3),
            },
            sort_keys=True,
        )

    @staticmethod
    def from_json(line: str) -> Record:
        data = json.loads(line)
        if data.get("version") not in READABLE_VERSIONS:
            raise ValueError(f"unsupported record version {data.get('version')!r}")
        candidate = Candidate.from_dict(
            {"task": data["task"], "sketch": data["sketch"]["index"], "values": data["values"]}
        )
        return Record(
            target=str(data["target"]),
            task_key=str(data["task"]),
            task_name=str(data.get("task_name", "")),
            candidate=candidate,
            pipeline=str(data["sketch"]["pipeline"]),
            rules=tuple(data["sketch"].get("rules", ())),
            config=IreeConfig.from_dict(data["config"]),
            root_index=int(data["root_index"]),
            result=MeasureResult.from_dict(data["result"]),
            timestamp=float(data["timestamp"]),
            family=str(data["sketch"].get("family", PIPELINE_FAMILY)),
        )

    @property
    def ok(self) -> bool:
        return self.result.error == ErrorKind.NONE and self.result.median_s is not None


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


def best_records(records: list[Record], target_key: str) -> dict[str, Record]:
    """Fastest correct record per task for one target; other targets are ignored.

    A task with no measured record falls back to its latest zero-trial pick
    (chosen by the cost model alone), so a measurement always wins over a guess.
    """
    best: dict[str, Record] = {}
    guesses: dict[str, Record] = {}
    for record in records:
        if record.target != target_key:
            continue
        if record.result.error == ErrorKind.NOT_MEASURED:
            guesses[record.task_key] = record
            continue
        if not record.ok:
            continue
        current = best.get(record.task_key)
        if current is None or record.result.median_s < current.result.median_s:
            best[record.task_key] = record
    return {**guesses, **best}


def now() -> float:
    return time.time()

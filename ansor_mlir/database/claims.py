"""Claims: the candidates a running tuner is about to measure, so that other tuners sharing its records leave
them alone, and a task's budget counts what is being measured as well as what is measured.

A store keeps the claims of every run; a run's claims lapse when the candidate is recorded, when the run
releases them, or (in a shared file) when its process ends.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ansor_mlir.core.schedule import Candidate
from ansor_mlir.database.measure_record import Record
from ansor_mlir.database.queries import is_search_record
from ansor_mlir.errors import AnsorError

# A claim by a process on another host (whose liveness cannot be checked) lapses after this long.
CLAIM_TTL_S = 6 * 3600.0
CLAIMS_SUFFIX = ".claims"


@dataclass(frozen=True)
class Claim:
    """A candidate a running tuner is about to measure: other tuners on the log leave it alone."""

    run: str
    pid: int
    host: str
    time: float
    target: str
    task_key: str
    identity: str

    def to_json(self) -> str:
        return json.dumps({"run": self.run, "pid": self.pid, "host": self.host, "time": self.time,
                           "target": self.target, "task": self.task_key, "id": self.identity}, sort_keys=True)

    @staticmethod
    def from_json(line: str) -> Claim:
        d = json.loads(line)
        return Claim(str(d["run"]), int(d["pid"]), str(d["host"]), float(d["time"]), str(d["target"]),
                     str(d["task"]), str(d["id"]))

    @property
    def key(self) -> str:
        return claim_key(self.target, self.identity)


def claim_target(target_key: str, fingerprint: str) -> str:
    """The target a claim is for: the target's key and machine, as records name them."""
    return f"{target_key}|{fingerprint}"


def claim_key(target: str, identity: str) -> str:
    return f"{target}\n{identity}"


def record_key(record: Record) -> str:
    """What a claim is matched against: the target (and machine) and the candidate as written."""
    return claim_key(claim_target(record.target, record.fingerprint), record.candidate.identity)


@dataclass
class Recorded:
    """What a store holds, as claims see it: the candidates recorded (`record_key`), and the search records
    per (claim target, task) that a task's budget counts."""

    keys: set[str] = field(default_factory=set)
    counts: dict[tuple[str, str], int] = field(default_factory=dict)

    def note(self, records: Iterable[object]) -> None:
        for record in records:
            if not isinstance(record, Record):
                continue
            self.keys.add(record_key(record))
            if is_search_record(record):
                key = (claim_target(record.target, record.fingerprint), record.task_key)
                self.counts[key] = self.counts.get(key, 0) + 1


def grant(target: str, candidates: Iterable[Candidate], budget: int | None, others: list[Claim],
          mine: dict[str, Claim], recorded: Recorded, make_claim: Callable[[Candidate], Claim]) -> set[str]:
    """The identities granted to a run, whose claims (`mine`, by key) gain them: candidates neither recorded
    nor claimed by another live run, and, with a `budget` (records a task may have), no more than its
    recorded search records and all live claims leave room for."""
    taken = {c.key for c in others} | recorded.keys
    granted: set[str] = set()
    for candidate in candidates:
        key = claim_key(target, candidate.identity)
        if budget is not None:
            pending = sum(1 for c in [*others, *mine.values()]
                          if c.target == target and c.task_key == candidate.task_key)
            if recorded.counts.get((target, candidate.task_key), 0) + pending >= budget:
                break
        if key not in taken:
            granted.add(candidate.identity)
            mine[key] = make_claim(candidate)
    return granted


def alive(claim: Claim, host: str, now_s: float) -> bool:
    """A claim holds while its process runs (same host), or for `CLAIM_TTL_S` (another host)."""
    if claim.host != host:
        return now_s - claim.time < CLAIM_TTL_S
    try:
        os.kill(claim.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_claims_file(path: Path, run: str, host: str, recorded: Recorded) -> list[Claim]:
    """The live claims of other runs in a claims file (of running processes, for candidates not recorded)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise AnsorError(f"cannot read {path}: {exc.strerror or exc}") from None
    now_s, claims = time.time(), []
    for line in text.splitlines():
        try:
            claim = Claim.from_json(line)
        except (ValueError, KeyError, TypeError, OverflowError):
            continue  # a private file: a bad line is a torn write of a killed run
        if claim.run != run and claim.key not in recorded.keys and alive(claim, host, now_s):
            claims.append(claim)
    return claims


def write_claims_file(path: Path, claims: list[Claim], run: str) -> None:
    """Replace the claims file at once (a temporary file renamed over it); no claims: no file."""
    if not claims:
        path.unlink(missing_ok=True)
        return
    temporary = path.with_name(path.name + f".{run}")
    try:
        temporary.write_text("".join(c.to_json() + "\n" for c in claims), encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise AnsorError(f"cannot write {path} (the claims of tuners sharing the log): "
                         f"{exc.strerror or exc}; free space and rerun with the same log to resume") from None

"""The in-memory database: records kept in this process only, for tests and for searches whose records need
not outlive them.

Every record passes the log's schema on the way in (written as a log line and read back), so a memory
database holds exactly what a log would, and a line the log's readers would skip is skipped here, with the
same warning. Handles made `shared_with` another are runs sharing one store, as processes share a log.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ansor_mlir.core.schedule import Candidate
from ansor_mlir.database.claims import Claim, Recorded, grant, record_key
from ansor_mlir.database.database import Database
from ansor_mlir.database.measure_record import Record
from ansor_mlir.database.program_record import ProgramRecord, program_record_from_dict
from ansor_mlir.database.schema import SchemaError

LOCATION = "memory"


@dataclass
class _Store:
    """What the runs sharing a memory database share; `lock` serialises them (tuners in threads)."""

    records: list[Record] = field(default_factory=list)
    programs: list[ProgramRecord] = field(default_factory=list)
    claims: dict[str, dict[str, Claim]] = field(default_factory=dict)
    recorded: Recorded = field(default_factory=Recorded)
    lock: threading.Lock = field(default_factory=threading.Lock)


class MemoryDatabase(Database):
    """A store in this process; `MemoryDatabase(shared_with=other)` is another run on `other`'s store."""

    def __init__(self, shared_with: MemoryDatabase | None = None):
        self._store = shared_with._store if shared_with is not None else _Store()
        self.run = uuid.uuid4().hex
        self._seen = 0  # records of the store this run has reported (or committed itself)
        self._mine: dict[str, Claim] = {}
        self._appended = 0

    @property
    def location(self) -> str:
        return LOCATION

    @property
    def appended(self) -> int:
        return self._appended

    def commit(self, records: Sequence[Record], unique: bool = False) -> list[Record]:
        store = self._store
        with store.lock:
            if unique:
                records = [r for r in records if record_key(r) not in store.recorded.keys]
            kept = [r for r in map(_through_schema, records) if r is not None]
            if self._seen == len(store.records):  # nothing from others in between: ours need no report
                self._seen += len(kept)
            store.records += kept
            store.recorded.note(kept)
            self._appended += len(records)
        return list(records)

    def commit_program_choice(self, choice: ProgramRecord) -> None:
        with self._store.lock:
            self._store.programs.append(program_record_from_dict(json.loads(choice.to_json())))
            self._appended += 1

    def records(self) -> list[Record]:
        with self._store.lock:
            return list(self._store.records)

    def program_records(self) -> list[ProgramRecord]:
        with self._store.lock:
            return list(self._store.programs)

    def refresh(self) -> tuple[list[Record], list[Claim]]:
        store = self._store
        with store.lock:
            fresh, self._seen = store.records[self._seen:], len(store.records)
            return fresh, self._others()

    def claim(self, target: str, candidates: Iterable[Candidate], budget: int | None = None) -> set[str]:
        store = self._store
        with store.lock:
            others = self._others()
            now_s, host = time.time(), socket.gethostname()
            granted = grant(target, candidates, budget, others, self._mine, store.recorded,
                            lambda c: Claim(self.run, os.getpid(), host, now_s, target, c.task_key, c.identity))
            store.claims[self.run] = self._mine
        return granted

    def release(self) -> None:
        with self._store.lock:
            self._mine = {}
            self._store.claims.pop(self.run, None)

    def _others(self) -> list[Claim]:
        """Live claims of other runs: those for candidates not recorded yet (under the store's lock)."""
        recorded = self._store.recorded.keys
        self._mine = {k: c for k, c in self._mine.items() if k not in recorded}
        self._store.claims[self.run] = self._mine
        return [c for run, claims in self._store.claims.items() if run != self.run
                for c in claims.values() if c.key not in recorded]


def _through_schema(record: Record) -> Record | None:
    """The record as the log's readers would read it back; None (with their warning) for one they skip."""
    try:
        return Record.from_json(record.to_json())
    except SchemaError as exc:
        warnings.warn(f"{LOCATION}: skipping corrupt record ({exc})", stacklevel=2)
        return None

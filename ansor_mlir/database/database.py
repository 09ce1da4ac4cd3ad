"""The `Database` interface: where tuning keeps its measurements and choices, and what it asks of them.

As MetaSchedule's `Database` (`commit_tuning_record`, `get_top_k`), an implementation only stores and
returns records; the questions (a task's fastest records, its history, the record each task applies, a
program's choice) are answered from what it returns, by the same functions (`queries`) for every one.
Several tuners may share one store: each is a run with its own handle, which reports what the others
committed since its last look (`refresh`) and claims what it is about to measure (`claim`), so that no
candidate is measured twice.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence

from ansor_mlir.core.schedule import Candidate, Sketch
from ansor_mlir.database import queries
from ansor_mlir.database.claims import Claim
from ansor_mlir.database.measure_record import Record
from ansor_mlir.database.program_record import ProgramRecord


class Database(ABC):
    """One run's handle on a store of measurement records (whole-program checks among them, as records
    with `program` set) and program choices (`ProgramRecord`)."""

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the records are kept, for messages (a log's path)."""

    @property
    @abstractmethod
    def appended(self) -> int:
        """How many records this handle committed."""

    @abstractmethod
    def commit(self, records: Sequence[Record], unique: bool = False) -> list[Record]:
        """Store measurements, durably before returning; with `unique`, only those whose candidate (for its
        target) is not stored yet. Returns what was stored."""

    @abstractmethod
    def commit_program_choice(self, choice: ProgramRecord) -> None:
        """Store what `tune` chose for a whole program."""

    @abstractmethod
    def records(self) -> list[Record]:
        """Every measurement record, in the order committed."""

    @abstractmethod
    def program_records(self) -> list[ProgramRecord]:
        """Every program choice, in the order committed."""

    @abstractmethod
    def refresh(self) -> tuple[list[Record], list[Claim]]:
        """(records committed since the last refresh that this handle has not seen, the live claims of other
        runs)."""

    @abstractmethod
    def claim(self, target: str, candidates: Iterable[Candidate], budget: int | None = None) -> set[str]:
        """Reserve candidates for `target` (`claims.claim_target`) before measuring them; returns the
        identities granted: those neither stored nor claimed by another live run, and, with a `budget`
        (records a task may have), no more than its stored search records and all live claims leave room
        for."""

    @abstractmethod
    def release(self) -> None:
        """Drop this run's claims (a run that stops early frees what it did not measure)."""

    def top_k(self, target_key: str, task_key: str, k: int, fingerprint: str = "") -> list[Record]:
        """A task's `k` fastest correct measurements for a target (and machine), fastest first."""
        return queries.top_k(self.records(), target_key, task_key, k, fingerprint)

    def task_records(self, target_key: str, task_key: str, sketches: list[Sketch], fingerprint: str = "",
                     ) -> list[Record]:
        """A task's measured records for a target, replayed onto `sketches` (`queries.task_history`)."""
        return queries.task_history(self.records(), target_key, task_key, sketches, fingerprint)

    def best(self, target_key: str, fingerprint: str = "") -> dict[str, Record]:
        """The record each task applies on a target (`queries.best_records`)."""
        return queries.best_records(self.records(), target_key, fingerprint)

    def program_choice(self, program: str, rewrites: tuple[str, ...], target_key: str, fingerprint: str,
                       ) -> ProgramRecord | None:
        """The latest choice for a program tuned with `rewrites` on a machine (None: none made)."""
        return queries.program_choice(self.program_records(), program, rewrites, target_key, fingerprint)

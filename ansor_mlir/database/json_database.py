"""The JSON-lines database: records kept in a tuning log file (`tuning_log.TuningLog`), shared by every
process that opens the same path."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from ansor_mlir.core.schedule import Candidate
from ansor_mlir.database.claims import Claim
from ansor_mlir.database.database import Database
from ansor_mlir.database.log_file import read_program_records, read_records
from ansor_mlir.database.measure_record import Record
from ansor_mlir.database.program_record import ProgramRecord
from ansor_mlir.database.tuning_log import LOCK_TIMEOUT_S, TuningLog


class JSONDatabase(Database):
    """A tuning log as a `Database`: one handle is one run on the log (its claims, what it has seen)."""

    def __init__(self, path: Path, lock_timeout_s: float = LOCK_TIMEOUT_S):
        self.log = TuningLog(Path(path), lock_timeout_s)

    @property
    def path(self) -> Path:
        return self.log.path

    @property
    def location(self) -> str:
        return str(self.log.path)

    @property
    def appended(self) -> int:
        return self.log.appended

    def commit(self, records: Sequence[Record], unique: bool = False) -> list[Record]:
        return self.log.append(list(records), unique=unique)

    def commit_program_choice(self, choice: ProgramRecord) -> None:
        self.log.append([choice])

    def records(self) -> list[Record]:
        return read_records(self.log.path)

    def program_records(self) -> list[ProgramRecord]:
        return read_program_records(self.log.path)

    def refresh(self) -> tuple[list[Record], list[Claim]]:
        return self.log.refresh()

    def claim(self, target: str, candidates: Iterable[Candidate], budget: int | None = None) -> set[str]:
        return self.log.claim(target, candidates, budget)

    def release(self) -> None:
        self.log.release()

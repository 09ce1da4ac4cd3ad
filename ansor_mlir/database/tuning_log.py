"""The tuning log's store: an append-only file of JSON lines that several tuners share.

Each measurement is appended, flushed and fsynced as soon as it completes, under a file lock (`LOG.lock`,
the `filelock` package), so several tuners can share one log: before measuring a batch each re-reads what
the others appended and claims the candidates it is about to measure (`LOG.claims`), so that none is
measured twice. Lines are never rewritten: a killed run loses nothing it recorded and a rerun with the
same log resumes where it stopped.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from ansor_mlir.core.schedule import Candidate
from ansor_mlir.database.claims import (
    CLAIMS_SUFFIX,
    Claim,
    Recorded,
    grant,
    read_claims_file,
    record_key,
    write_claims_file,
)
from ansor_mlir.database.log_file import log_problem, open_regular, parse_lines, write_durably
from ansor_mlir.database.measure_record import Record
from ansor_mlir.database.program_record import ProgramRecord
from ansor_mlir.errors import AnsorError

# How long a tuner waits for another to release the log (the lock is held only to read or append lines).
LOCK_TIMEOUT_S = 120.0
LOCK_SUFFIX = ".lock"


class TuningLog:
    """One run's handle on a tuning log shared with other processes.

    `refresh` returns the records appended since the last call (by anyone)
    and what other runs have claimed; `claim` reserves candidates before they
    are measured; `append` writes records durably. Every file operation holds
    the lock `LOG.lock` for milliseconds only. A write error undoes the
    partial write and raises an `AnsorError`, leaving the log as it was.
    """

    def __init__(self, path: Path, lock_timeout_s: float = LOCK_TIMEOUT_S):
        self.path = Path(path)
        problem = log_problem(self.path)
        if problem:
            raise AnsorError(f"tuning log {self.path} {problem}")
        self.run = uuid.uuid4().hex
        self.host = socket.gethostname()
        self.lock_timeout_s = lock_timeout_s
        self._lock = FileLock(str(self.path) + LOCK_SUFFIX, timeout=lock_timeout_s)
        self._claims_path = Path(str(self.path) + CLAIMS_SUFFIX)
        self._offset = 0
        self._lines = 0
        self._recorded = Recorded()
        self._unreported: list[Record] = []
        self._mine: dict[str, Claim] = {}
        self._claimed = False  # the claims file may hold this run's claims
        # Records and lines this run appended itself (counted for the interruption message).
        self.appended = 0

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the log's lock (milliseconds: one read or append)."""
        try:  # filelock retries a lock file it cannot create until its timeout: create it first
            os.close(os.open(self._lock.lock_file, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, 0o644))
        except OSError as exc:
            raise AnsorError(f"tuning log {self.path}: cannot create its lock file {self._lock.lock_file} "
                             f"({exc.strerror or exc})") from None
        try:
            self._lock.acquire()
        except Timeout:
            raise AnsorError(f"tuning log {self.path}: another process has held its lock ({self._lock.lock_file}) "
                             f"for over {self.lock_timeout_s:.0f} s; is a tuner stuck?") from None
        except OSError as exc:
            raise AnsorError(f"tuning log {self.path}: cannot create its lock file {self._lock.lock_file} "
                             f"({exc.strerror or exc})") from None
        try:
            yield
        finally:
            self._lock.release()

    def refresh(self) -> tuple[list[Record], list[Claim]]:
        """(records appended since the last refresh, the live claims of other runs)."""
        with self._locked():
            self._read_new()
            claims = self._read_claims()
        records, self._unreported = self._unreported, []
        return records, claims

    def claim(self, target: str, candidates: Iterable[Candidate], budget: int | None = None) -> set[str]:
        """Reserve candidates for `target` (`claim_target`) before measuring them; returns the identities
        granted: those neither in the log nor claimed by another live run, and, with a `budget` (records a
        task may have in the log), no more than its measured records and all live claims leave room for."""
        with self._locked():
            self._read_new()
            claims = self._read_claims()
            now_s = time.time()
            granted = grant(target, candidates, budget, claims, self._mine, self._recorded,
                            lambda c: Claim(self.run, os.getpid(), self.host, now_s, target, c.task_key, c.identity))
            self._write_claims(claims)
            self._claimed = True
        return granted

    def release(self) -> None:
        """Drop this run's claims (a run that stops early frees what it did not measure)."""
        if not self._claimed:
            return
        self._mine.clear()
        self._claimed = False
        try:
            with self._locked():
                self._write_claims(self._read_claims())
        except (AnsorError, OSError):
            pass  # claims of a finished run lapse anyway (its process ends, or its claims time out)

    def append(self, records: list[Record] | list[ProgramRecord], unique: bool = False) -> list:
        """Append records as whole lines, flushed and fsynced before returning; with `unique`, only those
        whose candidate (for its target) is not in the log yet. Returns what was written."""
        with self._locked():
            if unique:
                self._read_new()
                records = [r for r in records if record_key(r) not in self._recorded.keys]
            if not records:
                return []
            data = "".join(r.to_json() + "\n" for r in records).encode("utf-8")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = open_regular(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            except OSError as exc:
                raise AnsorError(f"cannot write tuning log {self.path}: {exc.strerror or exc}") from None
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    data = b"\n" + data  # a torn last line (a run killed mid-write) stays a line of its own
                write_durably(fd, data, size, self.path)
            finally:
                os.close(fd)
            if size == self._offset:  # nothing from others in between: no need to read our own lines back
                self._offset = size + len(data)
                self._lines += data.count(b"\n")
                self._recorded.note(records)
            self.appended += len(records)
        return records

    def _read_new(self) -> None:
        """Read the lines appended since the last read; their records wait in `_unreported` for `refresh`."""
        try:
            fd = open_regular(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise AnsorError(f"cannot read tuning log {self.path}: {exc.strerror or exc}") from None
        with os.fdopen(fd, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        # Under the lock nobody is writing: an unterminated last line was torn by a killed run, and is
        # consumed (and warned about) once the next append terminates it.
        records, consumed, lines = parse_lines(self.path, data, self._lines + 1, final=False)
        self._offset += consumed
        self._lines += lines
        self._recorded.note(records)
        self._unreported += records

    def _read_claims(self) -> list[Claim]:
        """Live claims of other runs (of running processes, for candidates not in the log yet)."""
        self._mine = {k: c for k, c in self._mine.items() if k not in self._recorded.keys}
        return read_claims_file(self._claims_path, self.run, self.host, self._recorded)

    def _write_claims(self, others: list[Claim]) -> None:
        write_claims_file(self._claims_path, others + list(self._mine.values()), self.run)


def append_records(path: Path, records: list[Record]) -> None:
    """Append records and make them durable before returning (under the log's lock)."""
    if records:
        TuningLog(Path(path)).append(records)

"""Databases by name, as MetaSchedule's `Database.create("json" | "memory")`."""

from __future__ import annotations

from pathlib import Path

from ansor_mlir.database.database import Database
from ansor_mlir.database.json_database import JSONDatabase
from ansor_mlir.database.memory_database import MemoryDatabase
from ansor_mlir.errors import AnsorError

DATABASES = ("json", "memory")


def make_database(choice: str | Path | Database, path: Path | None = None) -> Database:
    """The instance given; the log at a `Path` (`json`); `"json"` with the log's `path`; or `"memory"`."""
    if isinstance(choice, Database):
        return choice
    if isinstance(choice, Path):
        return JSONDatabase(choice)
    if choice == "memory":
        return MemoryDatabase()
    if choice == "json":
        if path is None:
            raise AnsorError("database 'json' keeps its records in a tuning log: give the log's path")
        return JSONDatabase(path)
    raise AnsorError(f"unknown database {choice!r}: choose one of {', '.join(DATABASES)}, a tuning log's Path, "
                     "or a Database instance")

"""A program choice: what `tune` decided for a whole program after its search, kept in the log beside the
measurements (lines of `"kind": "program"`) so that every later user of the log builds what `tune` returned.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ansor_mlir.database.schema import (
    FORMAT_VERSION,
    SchemaError,
    is_bool,
    is_count,
    is_finite,
    is_str,
    is_str_list,
    read_field,
    read_versions,
)

PROGRAM_KIND = "program"


@dataclass(frozen=True)
class ProgramRecord:
    """A program-level choice made after tuning, for one program and one machine: whether its rewrites are kept
    (`tuning.rewrite_check`) and the runtime device it runs on (`tuning.device_choice`).

    `program` identifies the program as given (`mlir.context.program_key`), `rewrites` the rewrites it was
    tuned with. `records_threads` is the thread count whose records the program applies: the target's own
    (0), or 1 where the program runs on one thread with the one-thread search's choices
    (`tuning.device_choice`). `apply_best`, the emitted specs and `compile` follow the latest such record of
    their program, so they build what `tune` returned. It is a log line of its own kind (`"kind": "program"`).
    """

    target: str
    fingerprint: str
    program: str
    rewrites: tuple[str, ...]
    rewrites_kept: bool
    device: str
    timestamp: float
    versions: tuple[tuple[str, str], ...] = ()
    records_threads: int = 0

    def to_json(self) -> str:
        return json.dumps({"kind": PROGRAM_KIND, "version": FORMAT_VERSION, "target": self.target,
                           "fingerprint": self.fingerprint, "program": self.program, "rewrites": list(self.rewrites),
                           "rewrites_kept": self.rewrites_kept, "device": self.device,
                           "timestamp": round(self.timestamp, 3), "versions": dict(self.versions),
                           "records_threads": self.records_threads}, sort_keys=True)


class ProgramLine(SchemaError):
    """A program record's line: not a candidate's record, and no fault (`read_records` passes over it)."""


def is_program_line(data: object) -> bool:
    return isinstance(data, dict) and data.get("kind") == PROGRAM_KIND


def program_record_from_dict(data: dict) -> ProgramRecord:
    """A program record from a log line's JSON object, every field checked."""
    versions = read_versions(data)
    return ProgramRecord(
        target=str(read_field(data, "target", is_str, "a string")),
        fingerprint=str(read_field(data, "fingerprint", is_str, "a string")),
        program=str(read_field(data, "program", is_str, "a string")),
        rewrites=tuple(read_field(data, "rewrites", is_str_list, "a list of strings")),
        rewrites_kept=bool(read_field(data, "rewrites_kept", is_bool, "true or false")),
        device=str(read_field(data, "device", is_str, "a string")),
        timestamp=float(read_field(data, "timestamp", is_finite, "a finite number")),
        versions=versions,
        records_threads=int(read_field(data, "records_threads", is_count, "a non-negative integer",
                                       required=False) or 0),
    )

"""Program-level choices in the log: the rewrites kept or dropped, and the runtime device, per program and machine.

`tune` decides both after the search by timing whole programs (`rewrite_check`,
`device_choice`). Recorded as a `ProgramRecord`, the decision travels with the
log: `apply_best`, the emitted tuning spec and transform library, and
`compile(log=)` build the program `tune` returned (the program as given where
its rewrites lost) and run it on the device it ran fastest on, without the
caller repeating the choice.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from ansor_mlir.core.target import Target
from ansor_mlir.database.records import (
    ProgramRecord,
    TuningLog,
    producer_versions,
    program_choice,
    read_program_records,
)
from ansor_mlir.frontend.program_rewrites import RewrittenProgram
from ansor_mlir.mlir.context import program_key
from ansor_mlir.tuning.device_choice import DeviceChoice
from ansor_mlir.tuning.rewrite_check import RewriteCheck


def record_choices(log: Path, target: Target, given_text: str, name: str, rewrites: tuple[str, ...],
                   kept: RewriteCheck | None, device: DeviceChoice | None) -> ProgramRecord | None:
    """Append what the timed checks decided (nothing when neither was timed: the defaults stand)."""
    if (kept is None or kept.check is None) and (device is None or device.check is None):
        return None
    record = ProgramRecord(
        target=target.key, fingerprint=target.fingerprint, program=program_key(given_text, name), rewrites=rewrites,
        rewrites_kept=kept.kept if kept is not None else True,
        device=device.device if device is not None else target.runtime_device(),
        timestamp=time.time(), versions=producer_versions(),
        records_threads=device.records_threads if device is not None else 0)
    TuningLog(log).append([record])
    return record


def recorded_choice(log: str | Path | None, given_text: str, name: str, changed: RewrittenProgram,
                    target: Target) -> ProgramRecord | None:
    """The log's latest choice for this program (as given) tuned with these rewrites on this machine."""
    if log is None or not Path(log).is_file():
        return None
    records = read_program_records(Path(log))
    if not records:
        return None
    return program_choice(records, program_key(given_text, name), changed.names, target.key, target.fingerprint)


def chosen_text(given_text: str, changed: RewrittenProgram, choice: ProgramRecord | None) -> str:
    """The program to build: the rewritten one, unless the log's choice dropped its rewrites."""
    return given_text if choice is not None and not choice.rewrites_kept else changed.text


def records_target(target: Target, choice: ProgramRecord | None) -> Target:
    """The target whose records the program applies: `target`, or its one-thread form where the log's choice
    runs the program on one thread with the one-thread search's choices (`tuning.device_choice`)."""
    if choice is None or choice.records_threads in (0, target.threads):
        return target
    return dataclasses.replace(target, threads=choice.records_threads)

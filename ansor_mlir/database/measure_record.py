"""A measurement record: one measured candidate of one task for one target, as a log line and back.

The line carries the candidate's whole schedule trace, so it replays without the rules that derived it; a
line of an older schema is read as it is and upgraded against the task's sketches (`schema_upgrade`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.schedule import Candidate, Family, Sketch
from ansor_mlir.core.task import IreeConfig
from ansor_mlir.database.program_check import ProgramCheck, program_from_dict
from ansor_mlir.database.program_record import ProgramLine, is_program_line
from ansor_mlir.database.schema import (
    CONVERSION_ERRORS,
    FORMAT_VERSION,
    READABLE_VERSIONS,
    SchemaError,
    describe,
    is_count,
    is_finite,
    is_int,
    is_int_lists,
    is_non_negative,
    is_number,
    is_object,
    is_str,
    is_str_list,
    is_time,
    optional,
    read_field,
    read_versions,
)


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
    # The program rewrites (`frontend.program_rewrites`) that made the program its task came from.
    rewrites: tuple[str, ...] = ()

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
                **({"rewrites": list(self.rewrites)} if self.rewrites else {}),
            },
            sort_keys=True,
        )

    @staticmethod
    def from_json(line: str) -> Record:
        """A record from one log line; a line that is not one raises `SchemaError` naming what is wrong."""
        try:
            data = json.loads(line)
        except RecursionError:
            raise SchemaError("nested too deeply to be a record") from None
        except ValueError as exc:
            raise SchemaError(f"not JSON: {exc}") from None
        return record_from_dict(data)

    @property
    def ok(self) -> bool:
        return self.result.error == ErrorKind.NONE and is_time(self.result.median_s)


def now() -> float:
    """A record's timestamp."""
    return time.time()


def result_from_dict(data: object) -> MeasureResult:
    """A measurement, its times checked: a correct one has a finite, positive median."""
    if not isinstance(data, dict):
        raise SchemaError(f"'result' is {describe(data)}, expected an object")
    kinds = [k.value for k in ErrorKind]
    error = read_field(data, "error", lambda v: v in kinds, f"one of {', '.join(kinds)}", "result.")
    correct = error == ErrorKind.NONE.value
    time_check = is_time if correct else optional(is_non_negative)
    expected = "a finite, positive time" if correct else "null or a finite time >= 0"
    median = read_field(data, "median_s", time_check, expected, "result.", required=correct)
    spread = read_field(data, "spread_s", optional(is_non_negative), "null or a finite time >= 0", "result.", False)
    repeats = read_field(data, "repeats", is_count, "a count", "result.", False)
    compile_s = read_field(data, "compile_s", is_non_negative, "a finite time >= 0", "result.", False)
    max_error = read_field(data, "max_abs_error", optional(is_number), "null or a number", "result.", False)
    message = read_field(data, "message", is_str, "a string", "result.", False)
    worker = read_field(data, "worker", is_str, "a string", "result.", False)  # absent before the cluster runner
    device = read_field(data, "device", is_str, "a string", "result.", False)
    # Anchored times (`tuning.anchor`): absent before anchoring and where a batch was not scaled.
    measured = read_field(data, "measured_s", optional(is_time), "null or a finite, positive time", "result.", False)
    reference = read_field(data, "reference_s", optional(is_time), "null or a finite, positive time", "result.",
                           False)
    return MeasureResult(ErrorKind(error), median, spread, repeats or 0, compile_s or 0.0, max_error, message or "",
                         worker=worker or "", device=device or "", measured_s=measured, reference_s=reference)


def record_from_dict(data: object) -> Record:
    """A record from a log line's JSON value, every field checked against the schema of its version."""
    if not isinstance(data, dict):
        raise SchemaError(f"the line is {describe(data)}, expected a record object")
    if is_program_line(data):
        raise ProgramLine("a program record")
    version = read_field(data, "version", is_int, "an integer")
    if version not in READABLE_VERSIONS:
        raise SchemaError(f"record version {version!r} is not one of {READABLE_VERSIONS}: written by a newer "
                          "ansor-mlir? upgrade, or tune again with a fresh log")
    target = read_field(data, "target", is_str, "a string")
    task = read_field(data, "task", is_str, "a string")
    task_name = read_field(data, "task_name", is_str, "a string", required=False) or ""
    sketch_data = read_field(data, "sketch", is_object, "an object")
    index = read_field(sketch_data, "index", is_int, "an integer", "sketch.")
    rules = tuple(read_field(sketch_data, "rules", is_str_list, "a list of strings", "sketch.", False) or ())
    families = [f.value for f in Family]
    family = read_field(sketch_data, "family", lambda v: v in families, f"one of {', '.join(families)}", "sketch.",
                        False) or Family.PIPELINE.value
    trace = read_field(sketch_data, "trace", is_object, "an object", "sketch.", False)
    values = read_field(data, "values", is_int_lists, "an object of integer lists")
    config = read_field(data, "config", is_object, "an object")
    read_field(config, "pipeline", is_str, "a string", "config.")
    read_field(config, "levels", is_int_lists, "an object of integer lists", "config.")
    root_index = read_field(data, "root_index", is_count, "an index >= 0")
    result = result_from_dict(read_field(data, "result", lambda v: True, ""))
    timestamp = read_field(data, "timestamp", is_finite, "a finite number")
    versions = read_versions(data)
    fingerprint = read_field(data, "fingerprint", is_str, "a string", required=False) or ""
    program = read_field(data, "program", optional(is_object), "null or an object", required=False)
    rewrites = read_field(data, "rewrites", is_str_list, "a list of strings", required=False) or []
    try:
        candidate = Candidate.from_dict({"task": task, "sketch": index, "values": values})
        sketch = Sketch.from_trace(trace, task, index, rules) if version >= 3 and trace else None
        record = Record(
            target=target, task_key=task, task_name=task_name, candidate=candidate, sketch=sketch,
            config=IreeConfig.from_dict(config), root_index=root_index, result=result, timestamp=float(timestamp),
            versions=versions, fingerprint=fingerprint,
            program=program_from_dict(program) if program is not None else None, rewrites=tuple(rewrites),
            legacy_rules=rules if sketch is None else (), legacy_family=Family(family),
        )
        if sketch is not None:
            record.to_json()  # what is read must also write back and replay (its trace, its digest)
            _ = sketch.digest
    except SchemaError:
        raise
    except CONVERSION_ERRORS as exc:
        raise SchemaError(f"not a schedule this version can replay ({type(exc).__name__}: {exc})") from None
    return record

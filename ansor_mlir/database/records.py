"""The tuning log: a small append-only database of JSON lines, one measured candidate per line, and the
program-level choices made after tuning (`ProgramRecord`, lines of `"kind": "program"`).

Each measurement is appended, flushed and fsynced as soon as it completes, under a file lock (`LOG.lock`,
the `filelock` package), so several tuners can share one log: before measuring a batch each re-reads what
the others appended and claims the candidates it is about to measure (`LOG.claims`), so that none is
measured twice. Lines are never rewritten: a killed run loses nothing it recorded and a rerun with the
same log resumes where it stopped. A write that fails (disk full, I/O error) is undone back to the last
whole line, so the log stays valid.

Every line is checked against the record schema when read. A line that is not a record (any JSON shape,
any bytes, a torn last line, a non-finite, zero or negative time) is skipped with one warning naming its
line number, once per process; the file itself is left untouched.
"""

from __future__ import annotations

import json
import math
import os
import socket
import stat
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from filelock import FileLock, Timeout

from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.schedule import Candidate, Family, Sketch
from ansor_mlir.core.task import IreeConfig
from ansor_mlir.errors import AnsorError
from ansor_mlir.model.features import FEATURE_VERSION

# Version 3 records carry the whole schedule trace, so they replay without the rule list that derived them,
# and the versions that made them. Version 2 (sketch index + rule names) and 1 are read and upgraded against
# the task's sketches (`upgrade_legacy`).
FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)


def producer_versions() -> tuple[tuple[str, str], ...]:
    """What made a record: the record schema, ansor-mlir, IREE's compiler and the feature set."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "unknown"

    return (("ansor_mlir", installed("ansor-mlir")), ("features", str(FEATURE_VERSION)),
            ("iree", installed("iree-base-compiler")), ("schema", str(FORMAT_VERSION)))


@dataclass(frozen=True)
class ProgramCheck:
    """The user's whole program built with one task's candidate, timed alternately against the same program
    without it: per-round speedups (baseline / tuned), their quartiles, and the verdict.

    The baseline is IREE's default build with the other tasks' choices accepted before (`others` of them;
    0: IREE's default build itself), so a task's gain is judged where it will run: dispatches IREE runs side
    by side hide a faster one behind a slower one until that one is tuned too.
    """

    default_s: float
    tuned_s: float
    ratio_low: float
    ratio: float
    ratio_high: float
    rounds: int
    accepted: bool
    reason: str = ""
    others: int = 0

    def to_dict(self) -> dict:
        return {"default_s": self.default_s, "tuned_s": self.tuned_s, "ratio_low": self.ratio_low,
                "ratio": self.ratio, "ratio_high": self.ratio_high, "rounds": self.rounds,
                "accepted": self.accepted, "reason": self.reason, "others": self.others}

    @staticmethod
    def from_dict(data: dict) -> ProgramCheck:
        return ProgramCheck(float(data["default_s"]), float(data["tuned_s"]), float(data["ratio_low"]),
                            float(data["ratio"]), float(data["ratio_high"]), int(data["rounds"]),
                            bool(data["accepted"]), str(data.get("reason", "")), int(data.get("others", 0)))


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


PROGRAM_KIND = "program"


# ---- the record schema ----------------------------------------------------------------------------------------


class SchemaError(ValueError):
    """A log line that is not a record; the message names the field at fault."""


# What building a record from a line whose fields have the right JSON types can still raise on odd values
# (a trace naming an unknown primitive, an integer too long to convert): the line is not a record.
CONVERSION_ERRORS = (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError, RecursionError)


def is_time(value: object) -> bool:
    """A usable duration: a finite, positive number of seconds (never zero, negative, NaN or infinite)."""
    return _is_number(value) and math.isfinite(value) and value > 0


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _is_finite(value: object) -> bool:
    return _is_number(value) and math.isfinite(value)


def _optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda value: value is None or check(value)


def _is_non_negative(value: object) -> bool:
    return _is_finite(value) and value >= 0


def _is_non_negative_int(value: object) -> bool:
    return _is_int(value) and value >= 0


def _is_str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_int_lists(value: object) -> bool:
    """`{"name": [int, ...], ...}`: a candidate's values, a configuration's tile levels."""
    return isinstance(value, dict) and all(
        isinstance(v, list) and all(_is_int(x) for x in v) for v in value.values()
    )


def _shape(value: object) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if _is_number(value):
        return f"the number {value}" if len(str(value)) < 40 else "a huge number"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), type(value).__name__)


def _field(data: dict, key: str, check: Callable[[object], bool], expected: str, where: str = "",
           required: bool = True) -> object:
    """`data[key]` when it passes `check`; a missing required or ill-typed field is a `SchemaError`."""
    if key not in data:
        if required:
            raise SchemaError(f"missing '{where}{key}'")
        return None
    value = data[key]
    if not check(value):
        raise SchemaError(f"'{where}{key}' is {_shape(value)}, expected {expected}")
    return value


def result_from_dict(data: object) -> MeasureResult:
    """A measurement, its times checked: a correct one has a finite, positive median."""
    if not isinstance(data, dict):
        raise SchemaError(f"'result' is {_shape(data)}, expected an object")
    kinds = [k.value for k in ErrorKind]
    error = _field(data, "error", lambda v: v in kinds, f"one of {', '.join(kinds)}", "result.")
    time_check = is_time if error == ErrorKind.NONE.value else _optional(_is_non_negative)
    expected = "a finite, positive time" if error == ErrorKind.NONE.value else "null or a finite time >= 0"
    median = _field(data, "median_s", time_check, expected, "result.", required=error == ErrorKind.NONE.value)
    spread = _field(data, "spread_s", _optional(_is_non_negative), "null or a finite time >= 0", "result.", False)
    repeats = _field(data, "repeats", lambda v: _is_int(v) and v >= 0, "a count", "result.", False)
    compile_s = _field(data, "compile_s", _is_non_negative, "a finite time >= 0", "result.", False)
    max_error = _field(data, "max_abs_error", _optional(_is_number), "null or a number", "result.", False)
    message = _field(data, "message", _is_str, "a string", "result.", False)
    worker = _field(data, "worker", _is_str, "a string", "result.", False)  # absent before the cluster runner
    device = _field(data, "device", _is_str, "a string", "result.", False)
    # Anchored times (`tuning.anchor`): absent before anchoring and where a batch was not scaled.
    measured = _field(data, "measured_s", _optional(is_time), "null or a finite, positive time", "result.", False)
    reference = _field(data, "reference_s", _optional(is_time), "null or a finite, positive time", "result.", False)
    return MeasureResult(ErrorKind(error), median, spread, repeats or 0, compile_s or 0.0, max_error, message or "",
                         worker=worker or "", device=device or "", measured_s=measured, reference_s=reference)


def _is_zero(value: object) -> bool:
    return _is_number(value) and value == 0


def program_from_dict(data: object) -> ProgramCheck:
    if not isinstance(data, dict):
        raise SchemaError(f"'program' is {_shape(data)}, expected an object")
    rounds = _field(data, "rounds", lambda v: _is_int(v) and v >= 0, "a count", "program.")
    # A check that timed nothing (the program did not build or run: rounds 0) has no times, written as 0.
    timed, untimed = (is_time, "a finite, positive number") if rounds else (_is_zero, "0 (nothing was timed)")
    for key in ("default_s", "tuned_s", "ratio_low", "ratio", "ratio_high"):
        _field(data, key, timed, untimed, "program.")
    _field(data, "accepted", lambda v: isinstance(v, bool), "true or false", "program.")
    _field(data, "reason", _is_str, "a string", "program.", required=False)
    return ProgramCheck.from_dict(data)


class ProgramLine(SchemaError):
    """A program record's line: not a candidate's record, and no fault (`read_records` passes over it)."""


def program_record_from_dict(data: dict) -> ProgramRecord:
    """A program record from a log line's JSON object, every field checked."""
    versions = _field(data, "versions", lambda v: isinstance(v, dict) and all(map(_is_str, v.values())),
                      "an object of strings", required=False) or {}
    return ProgramRecord(
        target=str(_field(data, "target", _is_str, "a string")),
        fingerprint=str(_field(data, "fingerprint", _is_str, "a string")),
        program=str(_field(data, "program", _is_str, "a string")),
        rewrites=tuple(_field(data, "rewrites", _is_str_list, "a list of strings")),
        rewrites_kept=bool(_field(data, "rewrites_kept", lambda v: isinstance(v, bool), "true or false")),
        device=str(_field(data, "device", _is_str, "a string")),
        timestamp=float(_field(data, "timestamp", _is_finite, "a finite number")),
        versions=tuple(sorted((str(k), v) for k, v in versions.items())),
        records_threads=int(_field(data, "records_threads", _is_non_negative_int, "a non-negative integer",
                                   required=False) or 0),
    )


def record_from_dict(data: object) -> Record:
    """A record from a log line's JSON value, every field checked against the schema of its version."""
    if not isinstance(data, dict):
        raise SchemaError(f"the line is {_shape(data)}, expected a record object")
    if data.get("kind") == PROGRAM_KIND:
        raise ProgramLine("a program record")
    version = _field(data, "version", _is_int, "an integer")
    if version not in READABLE_VERSIONS:
        raise SchemaError(f"record version {version!r} is not one of {READABLE_VERSIONS}: written by a newer "
                          "ansor-mlir? upgrade, or tune again with a fresh log")
    target = _field(data, "target", _is_str, "a string")
    task = _field(data, "task", _is_str, "a string")
    task_name = _field(data, "task_name", _is_str, "a string", required=False) or ""
    sketch_data = _field(data, "sketch", lambda v: isinstance(v, dict), "an object")
    index = _field(sketch_data, "index", _is_int, "an integer", "sketch.")
    rules = tuple(_field(sketch_data, "rules", _is_str_list, "a list of strings", "sketch.", False) or ())
    families = [f.value for f in Family]
    family = _field(sketch_data, "family", lambda v: v in families, f"one of {', '.join(families)}", "sketch.",
                    False) or Family.PIPELINE.value
    trace = _field(sketch_data, "trace", lambda v: isinstance(v, dict), "an object", "sketch.", False)
    values = _field(data, "values", _is_int_lists, "an object of integer lists")
    config = _field(data, "config", lambda v: isinstance(v, dict), "an object")
    _field(config, "pipeline", _is_str, "a string", "config.")
    _field(config, "levels", _is_int_lists, "an object of integer lists", "config.")
    root_index = _field(data, "root_index", lambda v: _is_int(v) and v >= 0, "an index >= 0")
    result = result_from_dict(_field(data, "result", lambda v: True, ""))
    timestamp = _field(data, "timestamp", _is_finite, "a finite number")
    versions = _field(data, "versions", lambda v: isinstance(v, dict) and all(map(_is_str, v.values())),
                      "an object of strings", required=False) or {}
    fingerprint = _field(data, "fingerprint", _is_str, "a string", required=False) or ""
    program = _field(data, "program", _optional(lambda v: isinstance(v, dict)), "null or an object", required=False)
    rewrites = _field(data, "rewrites", _is_str_list, "a list of strings", required=False) or []
    try:
        candidate = Candidate.from_dict({"task": task, "sketch": index, "values": values})
        sketch = Sketch.from_trace(trace, task, index, rules) if version >= 3 and trace else None
        record = Record(
            target=target, task_key=task, task_name=task_name, candidate=candidate, sketch=sketch,
            config=IreeConfig.from_dict(config), root_index=root_index, result=result, timestamp=float(timestamp),
            versions=tuple(sorted((str(k), v) for k, v in versions.items())), fingerprint=fingerprint,
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


def upgrade_legacy(records: list[Record], task_key: str, sketches: list[Sketch]) -> list[Record]:
    """Records of one task with their traces: older-schema ones get the sketch at their index among
    `sketches` (derived by the version-2 rule list, which `cpu_rules` still is), when its rules match; a
    record naming a sketch this version does not derive is dropped with a warning."""
    out = []
    for record in records:
        if record.task_key != task_key:
            continue
        if record.sketch is None:
            index = record.candidate.sketch_index
            sketch = sketches[index] if 0 <= index < len(sketches) else None
            if sketch is None or sketch.rules != record.legacy_rules or sketch.family != record.legacy_family:
                warnings.warn(f"tuning log: a {record.legacy_family.value} record of task {record.task_name} names "
                              f"sketch {index} ({'+'.join(record.legacy_rules)}), which this version does not "
                              "derive: ignored", stacklevel=2)
                continue
            record = replace(record, sketch=sketch, legacy_rules=())
        out.append(record)
    return out


def for_target(record: Record, target_key: str, fingerprint: str = "") -> bool:
    """A record applies to a target when the keys match and, where both are known, so do the machines: a log
    tuned on one CPU is not applied on another that answers the same request (`cpu=host`)."""
    return record.target == target_key and (not fingerprint or not record.fingerprint
                                            or record.fingerprint == fingerprint)


def task_history(
    records: list[Record], target_key: str, task_key: str, sketches: list[Sketch], fingerprint: str = ""
) -> list[Record]:
    """A task's measured records for one target, replayed onto this run's sketches.

    Each record is matched to the sketch with the same trace (by digest), so
    its candidate carries that sketch's index here; a record whose trace this
    run does not derive keeps index -1 (it still counts as measured and can
    still be the best, since its own trace rebuilds it).
    """
    by_digest = {s.digest: s.index for s in sketches}
    mine = [r for r in records if for_target(r, target_key, fingerprint) and r.task_key == task_key
            and r.result.error != ErrorKind.NOT_MEASURED and r.program is None]
    out = []
    for record in upgrade_legacy(mine, task_key, sketches):
        index = by_digest.get(record.sketch.digest, -1)
        out.append(replace(record, candidate=replace(record.candidate, sketch_index=index)))
    return out


# ---- the log file ---------------------------------------------------------------------------------------------

# How long a tuner waits for another to release the log (the lock is held only to read or append lines).
LOCK_TIMEOUT_S = 120.0
# A claim by a process on another host (whose liveness cannot be checked) lapses after this long.
CLAIM_TTL_S = 6 * 3600.0
LOCK_SUFFIX = ".lock"
CLAIMS_SUFFIX = ".claims"
# Longest reason quoted in a skipped line's warning.
REASON_CHARS = 200


def log_problem(path: Path, writing: bool = True) -> str | None:
    """Why `path` cannot serve as a tuning log (None when it can): it must be a regular file, or, to write,
    a file that can be created. A FIFO, a device (`/dev/full`) or a directory is refused before it is opened."""
    try:
        info = path.stat()
    except FileNotFoundError:
        if not writing:
            return "does not exist"
        parent = path.absolute().parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir():
            return f"{parent} is not a directory"
        return None if os.access(parent, os.W_OK | os.X_OK) else f"cannot create it: directory {parent} is not writable"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not stat.S_ISREG(info.st_mode):
        return f"is {_file_kind(info.st_mode)}, not a regular file: name a file"
    if not os.access(path, (os.R_OK | os.W_OK) if writing else os.R_OK):
        return "is not writable" if writing else "is not readable"
    return None


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _open_regular(path: Path, flags: int) -> int:
    """A descriptor of a regular file; never blocks on a FIFO (O_NONBLOCK) nor writes to a device."""
    fd = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o644)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise AnsorError(f"tuning log {path} is {_file_kind(mode)}, not a regular file: name a file")
    return fd


# Lines already warned about in this process, by (file, line number, content): each is reported once, however
# often the log is read (the tuner, verification and apply-best each read it). Process-wide by definition.
_WARNED: set[tuple[str, int, int]] = set()
_WARNED_LOCK = threading.Lock()


def _warn_skipped(path: Path, number: int, line: bytes, reason: str) -> None:
    key = (str(path.absolute()), number, hash(line))
    with _WARNED_LOCK:
        if key in _WARNED:
            return
        _WARNED.add(key)
    if len(reason) > REASON_CHARS:
        reason = reason[:REASON_CHARS] + "..."
    warnings.warn(f"{path}:{number}: skipping corrupt record ({reason})", stacklevel=3)


def parse_line(line: bytes) -> Record:
    """One log line as a record; anything else raises `SchemaError`."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SchemaError(f"not UTF-8 text (byte {exc.start})") from None
    return Record.from_json(text)


def parse_lines(path: Path, data: bytes, first_number: int, final: bool) -> tuple[list[Record], int, int]:
    """(records, bytes consumed, lines consumed) of whole lines in `data`, whose first line is number
    `first_number`. An unterminated last line is left unconsumed unless `final` (then it is a torn line)."""
    records: list[Record] = []
    consumed = lines = 0
    while consumed < len(data):
        end = data.find(b"\n", consumed)
        if end < 0 and not final:
            break
        line = data[consumed:] if end < 0 else data[consumed:end]
        number = first_number + lines
        if line.strip():
            try:
                records.append(parse_line(line))
            except ProgramLine:
                pass  # read by `read_program_records`
            except SchemaError as exc:
                reason = str(exc) if end >= 0 else f"an unfinished last line, a run killed mid-write? ({exc})"
                _warn_skipped(path, number, line, reason)
        consumed = len(data) if end < 0 else end + 1
        lines += 1
    return records, consumed, lines


def read_records(path: Path) -> list[Record]:
    """All readable records of a log (none when it does not exist); bad lines are skipped with a warning."""
    path = Path(path)
    if not path.exists():
        return []
    problem = log_problem(path, writing=False)
    if problem:
        raise AnsorError(f"cannot read tuning log {path}: it {problem}")
    try:
        fd = _open_regular(path, os.O_RDONLY)
        with os.fdopen(fd, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise AnsorError(f"cannot read tuning log {path}: {exc.strerror or exc}") from None
    return parse_lines(path, data, 1, final=True)[0]


def read_program_records(path: Path) -> list[ProgramRecord]:
    """The log's program records (none when it does not exist); a malformed one is skipped with a warning."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if b'"kind"' not in line or b'"program"' not in line:
            continue
        try:
            data = json.loads(line)
            if isinstance(data, dict) and data.get("kind") == PROGRAM_KIND:
                out.append(program_record_from_dict(data))
        except (ValueError, RecursionError) as exc:
            _warn_skipped(path, number, line, str(exc))
    return out


def program_choice(records: list[ProgramRecord], program: str, rewrites: tuple[str, ...], target_key: str,
                   fingerprint: str) -> ProgramRecord | None:
    """The latest program record of a program, tuned with `rewrites`, on this machine (None: no choice made)."""
    mine = [r for r in records if (r.program, r.rewrites, r.target, r.fingerprint)
            == (program, rewrites, target_key, fingerprint)]
    return max(mine, key=lambda r: r.timestamp, default=None)


def append_records(path: Path, records: list[Record]) -> None:
    """Append records and make them durable before returning (under the log's lock)."""
    if records:
        TuningLog(Path(path)).append(records)


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


def _alive(claim: Claim, host: str, now_s: float) -> bool:
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
        self._logged: set[str] = set()
        self._counts: dict[tuple[str, str], int] = {}
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
            taken = {c.key for c in claims} | self._logged
            now_s = time.time()
            granted: set[str] = set()
            for candidate in candidates:
                key = claim_key(target, candidate.identity)
                if budget is not None:
                    pending = sum(1 for c in [*claims, *self._mine.values()]
                                  if c.target == target and c.task_key == candidate.task_key)
                    if self._counts.get((target, candidate.task_key), 0) + pending >= budget:
                        break
                if key not in taken:
                    granted.add(candidate.identity)
                    self._mine[key] = Claim(self.run, os.getpid(), self.host, now_s, target, candidate.task_key,
                                            candidate.identity)
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
                records = [r for r in records if record_key(r) not in self._logged]
            if not records:
                return []
            data = "".join(r.to_json() + "\n" for r in records).encode("utf-8")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = _open_regular(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            except OSError as exc:
                raise AnsorError(f"cannot write tuning log {self.path}: {exc.strerror or exc}") from None
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    data = b"\n" + data  # a torn last line (a run killed mid-write) stays a line of its own
                _write_durably(fd, data, size, self.path)
            finally:
                os.close(fd)
            if size == self._offset:  # nothing from others in between: no need to read our own lines back
                self._offset = size + len(data)
                self._lines += data.count(b"\n")
                self._note(records)
            self.appended += len(records)
        return records

    def _note(self, records: list[Record]) -> None:
        """Remember records now in the log: their candidates, and the search records per (target, task)."""
        for record in records:
            if not isinstance(record, Record):
                continue
            self._logged.add(record_key(record))
            if record.program is None and record.result.error != ErrorKind.NOT_MEASURED:
                key = (claim_target(record.target, record.fingerprint), record.task_key)
                self._counts[key] = self._counts.get(key, 0) + 1

    def _read_new(self) -> None:
        """Read the lines appended since the last read; their records wait in `_unreported` for `refresh`."""
        try:
            fd = _open_regular(self.path, os.O_RDONLY)
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
        self._note(records)
        self._unreported += records

    def _read_claims(self) -> list[Claim]:
        """Live claims of other runs (of running processes, for candidates not in the log yet)."""
        self._mine = {k: c for k, c in self._mine.items() if k not in self._logged}
        try:
            text = self._claims_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise AnsorError(f"cannot read {self._claims_path}: {exc.strerror or exc}") from None
        now_s, claims = time.time(), []
        for line in text.splitlines():
            try:
                claim = Claim.from_json(line)
            except (ValueError, KeyError, TypeError, OverflowError):
                continue  # a private file: a bad line is a torn write of a killed run
            if claim.run != self.run and claim.key not in self._logged and _alive(claim, self.host, now_s):
                claims.append(claim)
        return claims

    def _write_claims(self, others: list[Claim]) -> None:
        claims = others + list(self._mine.values())
        if not claims:
            self._claims_path.unlink(missing_ok=True)
            return
        temporary = self._claims_path.with_name(self._claims_path.name + f".{self.run}")
        try:
            temporary.write_text("".join(c.to_json() + "\n" for c in claims), encoding="utf-8")
            os.replace(temporary, self._claims_path)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise AnsorError(f"cannot write {self._claims_path} (the claims of tuners sharing the log): "
                             f"{exc.strerror or exc}; free space and rerun with the same log to resume") from None


def _write_durably(fd: int, data: bytes, size: int, path: Path) -> None:
    """Write all of `data` and fsync it; on failure cut the file back to `size` (its last whole line)."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException as exc:  # an interrupt between two partial writes is undone too
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
            kept = "the log keeps every record written before"
        except OSError:
            kept = "the log may end with a partial line, which readers skip"
        if not isinstance(exc, OSError):
            raise
        raise AnsorError(f"cannot write tuning log {path}: {exc.strerror or exc}; {kept}: free space (or fix "
                         "the device) and rerun with the same log to resume") from None


def best_records(records: list[Record], target_key: str, fingerprint: str = "") -> dict[str, Record]:
    """The record to apply per task for one target (and machine, `for_target`); others are ignored.

    A task whose candidates were checked in the whole program gets its
    accepted candidate with the best program speedup, or, when the program
    rejected them all, IREE's default (its sketch-zero record): what the
    program measured beats what the task measured. Otherwise the fastest
    correct task measurement; a task with none falls back to its latest
    zero-trial pick (chosen by the cost model alone), so a measurement always
    wins over a guess.
    """
    best: dict[str, Record] = {}
    guesses: dict[str, Record] = {}
    defaults: dict[str, Record] = {}
    checked: dict[str, dict[str, Record]] = {}
    for record in records:
        if not for_target(record, target_key, fingerprint):
            continue
        if record.program is not None:
            checked.setdefault(record.task_key, {})[record.candidate.identity] = record  # the latest check counts
            continue
        if record.result.error == ErrorKind.NOT_MEASURED:
            guesses[record.task_key] = record
            continue
        if not record.ok:
            continue
        if record.is_default:
            defaults.setdefault(record.task_key, record)
        current = best.get(record.task_key)
        if current is None or record.result.beats(current.result):
            best[record.task_key] = record
    for task_key, checks in checked.items():
        accepted = [r for r in checks.values() if r.program.accepted]
        if accepted:
            best[task_key] = max(accepted, key=lambda r: r.program.ratio)
        elif task_key in defaults:
            best[task_key] = defaults[task_key]
    return {**guesses, **best}


def now() -> float:
    return time.time()

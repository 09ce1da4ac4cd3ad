"""The log file: JSON lines read with corrupt-line tolerance and written whole or not at all.

Every line is checked against the record schema when read. A line that is not a record (any JSON shape,
any bytes, a torn last line, a non-finite, zero or negative time) is skipped with one warning naming its
line number, once per process; the file itself is left untouched. A write that fails (disk full, I/O error)
is undone back to the last whole line, so the log stays valid.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import warnings
from pathlib import Path

from ansor_mlir.database.measure_record import Record
from ansor_mlir.database.program_record import ProgramLine, ProgramRecord, is_program_line, program_record_from_dict
from ansor_mlir.database.schema import SchemaError
from ansor_mlir.errors import AnsorError

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


def open_regular(path: Path, flags: int) -> int:
    """A descriptor of a regular file; never blocks on a FIFO (O_NONBLOCK) nor writes to a device."""
    fd = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o644)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise AnsorError(f"tuning log {path} is {_file_kind(mode)}, not a regular file: name a file")
    return fd


def write_durably(fd: int, data: bytes, size: int, path: Path) -> None:
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
        fd = open_regular(path, os.O_RDONLY)
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
            if is_program_line(data):
                out.append(program_record_from_dict(data))
        except (ValueError, RecursionError) as exc:
            _warn_skipped(path, number, line, str(exc))
    return out

"""The log's schema: its versions, what made a line, and the field checks every kind of record is read with.

A log is read by whoever holds it, whatever wrote it, so each field of a line is checked before it is used:
a line that fails is not a record (`SchemaError`, naming the field at fault), and the reader skips it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ansor_mlir.model.features import FEATURE_VERSION

# Version 3 records carry the whole schedule trace, so they replay without the rule list that derived them,
# and the versions that made them. Version 2 (sketch index + rule names) and 1 are read and upgraded against
# the task's sketches (`schema_upgrade.upgrade_legacy`).
FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)

# What building a record from a line whose fields have the right JSON types can still raise on odd values
# (a trace naming an unknown primitive, an integer too long to convert): the line is not a record.
CONVERSION_ERRORS = (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError, RecursionError)


class SchemaError(ValueError):
    """A log line that is not a record; the message names the field at fault."""


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


def is_time(value: object) -> bool:
    """A usable duration: a finite, positive number of seconds (never zero, negative, NaN or infinite)."""
    return is_number(value) and math.isfinite(value) and value > 0


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_str(value: object) -> bool:
    return isinstance(value, str)


def is_bool(value: object) -> bool:
    return isinstance(value, bool)


def is_object(value: object) -> bool:
    return isinstance(value, dict)


def is_finite(value: object) -> bool:
    return is_number(value) and math.isfinite(value)


def is_zero(value: object) -> bool:
    return is_number(value) and value == 0


def is_non_negative(value: object) -> bool:
    return is_finite(value) and value >= 0


def is_count(value: object) -> bool:
    return is_int(value) and value >= 0


def is_str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def is_int_lists(value: object) -> bool:
    """`{"name": [int, ...], ...}`: a candidate's values, a configuration's tile levels."""
    return isinstance(value, dict) and all(
        isinstance(v, list) and all(is_int(x) for x in v) for v in value.values()
    )


def optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda value: value is None or check(value)


def describe(value: object) -> str:
    """What a JSON value is, for a message (a huge number is not quoted whole)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if is_number(value):
        return f"the number {value}" if len(str(value)) < 40 else "a huge number"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), type(value).__name__)


def read_field(data: dict, key: str, check: Callable[[object], bool], expected: str, where: str = "",
               required: bool = True) -> object:
    """`data[key]` when it passes `check`; a missing required or ill-typed field is a `SchemaError`."""
    if key not in data:
        if required:
            raise SchemaError(f"missing '{where}{key}'")
        return None
    value = data[key]
    if not check(value):
        raise SchemaError(f"'{where}{key}' is {describe(value)}, expected {expected}")
    return value


def read_versions(data: dict) -> tuple[tuple[str, str], ...]:
    """The optional `versions` object of a line (what made it), as sorted pairs."""
    versions = read_field(data, "versions", lambda v: is_object(v) and all(map(is_str, v.values())),
                          "an object of strings", required=False) or {}
    return tuple(sorted((str(k), v) for k, v in versions.items()))

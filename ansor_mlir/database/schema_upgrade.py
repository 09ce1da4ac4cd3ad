"""Upgrading records of older schemas: a version-1 or -2 line names its sketch by index and rules, not by
trace, so it gets the trace of the sketch this version derives at that index when the rules still match."""

from __future__ import annotations

import warnings
from dataclasses import replace

from ansor_mlir.core.schedule import Sketch
from ansor_mlir.database.measure_record import Record


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

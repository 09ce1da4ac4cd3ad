"""Tuning with a measuring host reached only by copying files: export a batch, measure it there, import.

`export_batch` does a tuning round up to the measurement: per task the search
policy (its cost model taught by every record of the target already in the
log) proposes candidates not yet measured, the builder compiles them for the
target, and they go into a batch (`measure.batch_bundle`) with IREE's
default build (the time to beat), the task's inputs and the references every
output must match (IREE's default built for this host and run here: an
independent compilation). Build failures are logged at once. On the target
machine `python -m ansor_mlir.measure.offline_runner` times the batch;
`import_results` appends its results to the log as ordinary records, so
`--ansor-apply-best`, the next export (a model that learned from them) and
resumed tuning read them like any measurement.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.schedule import Candidate, Sketch
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.database.records import (
    Record,
    SchemaError,
    TuningLog,
    read_records,
    record_from_dict,
    result_from_dict,
    task_history,
)
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.target_resolution import parse_resolved_target
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.batch_bundle import Batch, BatchItem, read_batch, write_batch
from ansor_mlir.measure.builder import BuildInput
from ansor_mlir.measure.inputs import check_inputs
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.measure.local_runner import LocalRunner
from ansor_mlir.measure.runner import RunInput
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.cross_tuning import host_references, make_record
from ansor_mlir.tuning.options import make_search_policy
from ansor_mlir.tuning.tuner import TuneOptions, build_input, task_module

# The result an exported record carries until its measurement is imported.
PENDING = MeasureResult(ErrorKind.NOT_MEASURED, message="exported for measurement elsewhere")


@dataclass(frozen=True)
class ExportSummary:
    path: Path
    programs: int
    # Candidates that did not build (logged at once).
    failed: int
    tasks: int


def export_batch(text: str, what: str, target: Target, options: TuneOptions, path: Path,
                 per_task: int | None = None) -> ExportSummary:
    """A batch of up to `per_task` (default `options.batch_size`) new candidates per task, plus IREE's default
    of each task not yet measured, built for `target` and written to `path`."""
    tasks = [t for t in extract_tasks(text, target, what) if t.tunable]
    if not tasks:
        raise AnsorError(f"{what}: nothing to tune")
    policy = make_search_policy(options, target, random.Random(options.seed))
    history = read_records(options.log) if options.log.exists() else []
    chosen: list[tuple[Task, Sketch, Candidate]] = []
    for task in tasks:
        check_inputs(task.input_types, f"task {task.name}")
        sketches = generate_sketches(task, target)
        known = [r for r in task_history(history, target.key, task.key, sketches, target.fingerprint)
                 if r.result.error != ErrorKind.NOT_MEASURED]
        policy.update(task, sketches, [(r.candidate, r.result) for r in known if r.candidate.sketch_index >= 0])
        measured = {r.candidate.identity for r in known}
        default = Candidate(task.key, 0, ())
        picks = [] if default.identity in measured else [default]
        picks += policy.next_batch(task, sketches, measured, per_task or options.batch_size)
        by_index = {s.index: s for s in sketches}
        chosen += [(task, by_index[c.sketch_index], c) for c in picks]
    return export_candidates(chosen, target, options, path)


def export_candidates(chosen: Sequence[tuple[Task, Sketch, Candidate]], target: Target, options: TuneOptions,
                      path: Path) -> ExportSummary:
    """Build the given candidates for `target` and write them, with inputs and references, to a batch."""
    host = parse_resolved_target("llvm-cpu")
    builder = LocalBuilder(target, workers=options.build_workers, timeout_s=options.compile_timeout_s)
    host_builder = LocalBuilder(host, workers=1, timeout_s=options.compile_timeout_s)
    host_runner = LocalRunner(host, timeout_s=options.run_timeout_s, min_time_s=0.01, min_repeats=1)
    items: list[BatchItem] = []
    failed: list[Record] = []
    flows: dict[str, str] = {}
    data: dict[str, tuple[tuple[bytes, ...], tuple[bytes, ...]]] = {}
    try:
        for task in (t for t, _, _ in chosen):
            if task.key not in flows:
                flows[task.key] = compile_to_phase(task_module(task), target.compile_flags(), "flow", task.name)
                data[task.key] = host_references(task, host, host_builder, host_runner, options.seed)
        builds = builder.build([BuildInput(t.key, flows[t.key], t.root_index, None) if c.sketch_index == 0
                                else build_input(t, s, c, flows[t.key]) for t, s, c in chosen])
    finally:
        for closable in (builder, host_builder, host_runner):
            closable.close()
    for (task, sketch, candidate), build in zip(chosen, builds, strict=True):
        if not build.ok or build.program is None:
            failed.append(make_record(target, task, candidate, sketch,
                                      MeasureResult(build.error, compile_s=build.compile_s, message=build.message),
                                      options.rewrites))
            continue
        inputs, references = data[task.key]
        record = make_record(target, task, candidate, sketch, replace(PENDING, compile_s=build.compile_s),
                             options.rewrites)
        items.append(BatchItem(f"{task.name}/{len(items)}", RunInput(build.program, inputs, references),
                               json.loads(record.to_json())))
    write_batch(path, Batch(target.key, target.threads, tuple(items)))
    if failed:
        log = TuningLog(options.log)
        try:
            log.append(failed)
        finally:
            log.release()
    return ExportSummary(path, len(items), len(failed), len({t.key for t, _, _ in chosen}))


def import_results(batch_path: Path, results: Path, log: Path) -> list[Record]:
    """The batch's measurements in `results` appended to `log` as records (each id once, the last line wins)."""
    batch = read_batch(batch_path)
    by_id = {item.id: item for item in batch.items}
    measured: dict[str, MeasureResult] = {}
    try:
        lines = results.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise AnsorError(f"cannot read results {results}: {exc}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            item_id = str(entry["id"])
            result = result_from_dict(entry["result"])
        except (ValueError, KeyError, TypeError, SchemaError) as exc:
            raise AnsorError(f"{results}:{number}: not a result line ({exc}): measure the batch again") from None
        if item_id not in by_id:
            raise AnsorError(f"{results}:{number}: id {item_id!r} is not in batch {batch_path}: "
                             "import the results with the batch they came from")
        measured[item_id] = result
    records = []
    for item_id, result in measured.items():
        stub = record_from_dict(by_id[item_id].record)
        records.append(replace(stub, result=replace(result, compile_s=stub.result.compile_s)))
    tuning_log = TuningLog(log)
    try:
        tuning_log.append(records)
    finally:
        tuning_log.release()
    return records

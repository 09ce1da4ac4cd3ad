"""A log's best records applied to a program: the tuned flow-level module, the tuning spec, the transform library.

Each takes a program already rewritten (or not) as its caller chose, and a log whose records are for `target`.
The tuned module and the spec apply the same records to the same dispatches (`as_the_spec_applies`): the
whole-program checks timed the program built with the spec.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

from ansor_mlir.codegen.transform_strategy import render_strategy, strategy_name
from ansor_mlir.codegen.tuning_spec import attach_configs, render_library, render_spec, spec_sources, unmatchable
from ansor_mlir.core.schedule import Family
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.database.records import Record, best_records, read_records, upgrade_legacy
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.program_rewrites import parse_rewrites, rewrite_program
from ansor_mlir.frontend.task_extraction import extract_tasks, tasks_from_flow, validate_input
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.program_choice import recorded_choice, records_target


def flow_build_line(target: Target) -> str:
    """The first line of a tuned flow-level module: how to build it (with ansor-mlir's codegen flags)."""
    command = ["iree-compile", "THIS_FILE", *target.codegen_flags(), "-o", "tuned.vmfb"]
    return f"// Build the tuned program with: {' '.join(command)}\n"


def best_for_target(log: str | Path, target: Target) -> dict[str, Record]:
    """The log's record to apply per task for `target`; an error when the log is missing or has none for it."""
    path = Path(log)
    if not path.exists():
        raise AnsorError(f"tuning log {path} does not exist: run --ansor-tune with log={path} first")
    records = read_records(path)
    best = best_records(records, target.key, target.fingerprint)
    if records and not best:
        others = sorted({r.fingerprint or r.target for r in records})
        raise AnsorError(f"tuning log {path} has no record for this machine, {target.fingerprint} (it has "
                         f"{', '.join(others)}): tune on this machine, or name the target the log was tuned for")
    return best


def tuned_module(text: str, name: str, log: str | Path, target: Target) -> str:
    """The program `text` (already rewritten, or not, as chosen) lowered to dispatches with the log's best
    configuration on each."""
    validate_input(text, name)
    best = best_for_target(log, target)
    flow = compile_to_phase(text, target.compile_flags(), "flow", name)
    tasks = tasks_from_flow(flow, target, name)  # the flow above: not a second compile
    chosen = as_the_spec_applies(tasks, {key: r for key, r in best.items() if not r.is_default})
    configs = {task.key: (task.root_index, record.config) for task, record in chosen
               if record.family is not Family.TRANSFORM}
    strategies = best_strategies([task for task, _ in chosen], {t.key: r for t, r in chosen}, target)
    tuned, _ = attach_configs(flow, configs, name, strategies)
    return flow_build_line(target) + tuned


def as_the_spec_applies(tasks: Sequence[Task], tuned: dict[str, Record]) -> list[tuple[Task, Record]]:
    """(task, record) for each task the log's tuning spec configures, with the record it applies: the first
    entry whose matcher matches the task's root op (`spec_sources`), which may be another task's. The
    whole-program checks timed the program built with that spec."""
    sources = spec_sources(tasks, {k: r.family is Family.TRANSFORM for k, r in tuned.items()})
    return [(task, tuned[sources[task.key]]) for task in tasks if task.key in sources]


def best_strategies(
    tasks: Sequence[Task], best: dict[str, Record], target: Target
) -> dict[str, tuple[str, str]]:
    """(strategy name, text) per task (of the program's, as extracted) whose best record is a transform strategy,
    rebuilt from the record's own trace (older records: from the sketch they name, upgraded against this
    version's sketches)."""
    out = {}
    for task in tasks:
        record = best.get(task.key)
        if record is None or record.family is not Family.TRANSFORM:
            continue
        if record.sketch is None:
            upgraded = upgrade_legacy([record], task.key, generate_sketches(task, target))
            if not upgraded:
                raise AnsorError(
                    f"tuning log: task {task.name} record names transform sketch {record.candidate.sketch_index}, "
                    "which this version does not derive: retune with a fresh log"
                )
            record = upgraded[0]
        strategy = strategy_name(task, record.candidate)
        out[task.key] = (strategy, render_strategy(record.sketch, record.candidate, task, strategy))
    return out


def transform_library(text: str, name: str, log: str | Path, target: Target, records: Target) -> str:
    """A transform library with the best strategy of every task of `text` (built for `target`) tuned with the
    transform family, from the log's records of `records` (`program_choice.records_target`)."""
    best = best_for_target(log, records)
    tasks = extract_tasks(text, target, name)
    strategies = best_strategies(tasks, best, records)
    by_key = {t.key: t for t in tasks}
    return render_library([(by_key[key], *strategies[key]) for key in sorted(strategies)])


def tuning_spec(text: str, name: str, log: str | Path, target: Target) -> str | None:
    """The spec applying the best record of each task of `text` (as given: no rewrites), or None when every
    task's best is IREE's own configuration. A task whose root op the spec cannot match (`unmatchable`) is left
    to IREE's default, with a warning."""
    tasks = extract_tasks(text, target, name)
    best = best_for_target(log, target)
    tuned = [task for task in tasks if task.key in best and task.tunable and not best[task.key].is_default]
    left = {task.key: why for task in tuned if (why := unmatchable(task))}
    for task in tuned:
        if task.key in left:
            warnings.warn(f"{name}: the tuning spec leaves task {task.name} to IREE's default: {left[task.key]}",
                          stacklevel=3)
    tuned = [task for task in tuned if task.key not in left]
    entries = [(task, best[task.key].config) for task in tuned if best[task.key].family is not Family.TRANSFORM]
    strategies = best_strategies(tasks, {t.key: best[t.key] for t in tuned}, target)
    if not entries and not strategies:
        return None
    by_key = {task.key: task for task in tasks}
    return render_spec(entries, [(by_key[key], *strategies[key]) for key in sorted(strategies)])


def for_ordinary_flows(text: str, name: str, rewrites: str, what: str, log: str | Path,
                       target: Target) -> tuple[str, Target]:
    """The rewritten program a spec or library is made for, warning when it is not the input: IREE compiling
    the input would form other dispatches, and the rewritten ones' entries would match nothing. Where the log
    records that the rewrites lost to the program as given (`tuning.program_choice`), the program as given.
    Beside it, the target whose records it applies (`program_choice.records_target`)."""
    changed = rewrite_program(text, parse_rewrites(rewrites), name)
    choice = recorded_choice(log, text, name, changed, target)
    applied = records_target(target, choice)
    if choice is not None and not choice.rewrites_kept:
        return text, applied
    if changed.applied:
        warnings.warn(f"{name}: the {what} is for the program after rewrites {changed.summary()}, not for this "
                      f"input: compile that program with it (ansor-opt IN --ansor-rewrite="
                      f"\"rewrites={rewrites}\" -o REWRITTEN.mlir), or tune with rewrites=none", stacklevel=4)
    return changed.text, applied

"""The Python pipeline API, mirroring the `ansor-opt` passes one to one.

Arguments are checked before anything is read, compiled or written: a wrong
one raises `AnsorError` with the message `ansor-opt` gives for the same
option (its domains live in `passes.pass_options`). A `Path` is always a
file; a `str` is a file only when it looks like one (no newline, and it
names an existing file or ends in `.mlir`/`.onnx`, or is `file.py:factory`),
otherwise it is MLIR text.
"""

from __future__ import annotations

import dataclasses
import stat
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iree.compiler import ir

from ansor_mlir.codegen.transform_strategy import render_strategy, strategy_name
from ansor_mlir.codegen.tuning_spec import attach_configs, render_library, render_spec, spec_sources, unmatchable
from ansor_mlir.core.schedule import Family, Sketch
from ansor_mlir.core.target import Target, parse_target
from ansor_mlir.core.task import Task
from ansor_mlir.database.records import Record, best_records, read_records, upgrade_legacy
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.model_source import ModelSource, is_model_object, is_model_reference, load_model
from ansor_mlir.frontend.pad_fusion import NAMES as FUSED_PAD_REWRITES
from ansor_mlir.frontend.program_rewrites import (
    DEFAULT_REWRITES,
    NO_REWRITES,
    RewrittenProgram,
    parse_rewrites,
    rewrite_program,
)
from ansor_mlir.frontend.target_resolution import resolve_target as resolve_cpu_target
from ansor_mlir.frontend.task_extraction import extract_tasks as _extract_tasks
from ansor_mlir.frontend.task_extraction import tasks_from_flow, validate_input
from ansor_mlir.frontend.torch_import import is_factory_reference
from ansor_mlir.measure.gpu_device import no_device_message
from ansor_mlir.measure.idle_wakeup import threaded_timing_note
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.measure.local_runner import LocalRunner
from ansor_mlir.measure.qemu_runner import find_emulated_runtime
from ansor_mlir.mlir.context import MAX_TEXT_CHARS
from ansor_mlir.mlir.iree_compiler import (
    FLOW_PAD_FLAG,
    compile_to_phase,
    compile_vmfb,
    first_error_line,
    tuning_spec_flags,
)
from ansor_mlir.mlir.iree_module import CompiledModel
from ansor_mlir.passes.ansor_passes import Toolkit
from ansor_mlir.passes.pass_options import PASSES, BadValue, Option
from ansor_mlir.passes.pipeline import AfterPass, PassInvocation, PipelineResult
from ansor_mlir.passes.pipeline import run_pipeline as _run_pipeline
from ansor_mlir.space.sketch_rules import generate_sketches as _generate_sketches
from ansor_mlir.tuning.batch_export import ExportSummary
from ansor_mlir.tuning.batch_export import export_batch as _export_batch
from ansor_mlir.tuning.batch_export import import_results as _import_results
from ansor_mlir.tuning.callbacks import TuningCallback
from ansor_mlir.tuning.cross_tuning import tune_by_model
from ansor_mlir.tuning.device_choice import (
    DeviceChoice,
    OneThreadChoices,
    alternatives,
    build_target,
    choose_device,
)
from ansor_mlir.tuning.one_thread_start import one_thread_start
from ansor_mlir.tuning.program_choice import chosen_text, record_choices, recorded_choice, records_target
from ansor_mlir.tuning.progress import ConsoleProgress
from ansor_mlir.tuning.rewrite_check import RewriteCheck, check_rewrites
from ansor_mlir.tuning.task_result import TaskResult
from ansor_mlir.tuning.tuner import TuneOptions, Tuner, tunable_tasks
from ansor_mlir.tuning.verification import UserProgram


def flow_build_line(target: Target) -> str:
    """The first line of a tuned flow-level module: how to build it (with ansor-mlir's codegen flags)."""
    command = ["iree-compile", "THIS_FILE", *target.codegen_flags(), "-o", "tuned.vmfb"]
    return f"// Build the tuned program with: {' '.join(command)}\n"


# Suffixes that make a `str` a file name rather than MLIR text.
PATH_SUFFIXES = (".mlir", ".onnx")
# Longest `str` considered as a file name (longer ones are text).
MAX_PATH_CHARS = 4096


# ---- argument checks ---------------------------------------------------------------------------------------


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _invalid(function: str, name: str, value: object, why: str) -> AnsorError:
    return AnsorError(f"{function}: invalid {name}={_shown(value)}: {why}")


def _domain(option: Option) -> str:
    """What the command line says of a value outside an option's domain (its parser's own message)."""
    try:
        option.parse("")
    except BadValue as exc:
        return str(exc)
    return f"expected {option.allowed}"


def check_option(function: str, name: str, value: object, pass_name: str = "ansor-tune",
                 option_name: str | None = None) -> object:
    """`value` checked against a pass option's domain, as `ansor-opt` checks the option's text."""
    option = PASSES[pass_name].option(option_name or name)
    if option.name == "log":
        if not isinstance(value, (str, Path)):
            raise _invalid(function, name, value, "expected a file name (str or Path)")
    elif isinstance(option.default, float) and (not isinstance(value, (int, float)) or isinstance(value, bool)):
        raise _invalid(function, name, value, _domain(option))
    elif isinstance(option.default, int) and (not isinstance(value, int) or isinstance(value, bool)):
        raise _invalid(function, name, value, _domain(option))
    elif not isinstance(option.default, (int, float)) and not isinstance(value, str):
        raise _invalid(function, name, value, _domain(option))
    try:
        return option.parse(str(value))
    except BadValue as exc:
        raise _invalid(function, name, value, str(exc)) from None


def check_type(function: str, name: str, value: object, types: type | tuple[type, ...], expected: str) -> None:
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in (types if isinstance(types, tuple)
                                                                              else (types,))):
        raise _invalid(function, name, value, f"expected {expected}")


def check_target(function: str, target: object) -> None:
    if not isinstance(target, (str, Target)):
        raise _invalid(function, "target", target, "expected a backend name (llvm-cpu) or a Target")
    if isinstance(target, str):
        check_option(function, "target", target)


def check_callbacks(function: str, callbacks: object) -> None:
    events = [name for name in vars(TuningCallback) if name.startswith("on_")]
    if not isinstance(callbacks, Sequence) or isinstance(callbacks, (str, bytes)):
        raise _invalid(function, "callbacks", callbacks, "expected a list of TuningCallback objects")
    for callback in callbacks:
        if not all(callable(getattr(callback, event, None)) for event in events):
            raise _invalid(function, "callbacks", callback, f"not a TuningCallback (it needs {', '.join(events)})")


def check_tune_options(function: str, options: TuneOptions) -> None:
    """Every field of a `TuneOptions` within the domain `ansor-tune`'s options give it."""
    for field, option in (("trials", "trials"), ("seed", "seed"), ("batch_size", "batch"), ("verify", "verify"),
                          ("policy", "policy"), ("log", "log"), ("task_scheduler", "task-scheduler"),
                          ("early_stopping", "early-stopping"),
                          ("one_thread_share", "one-thread-share")):
        check_option(function, f"options.{field}", getattr(options, field), option_name=option)
    check_trials_per_task(function, "options.trials_per_task", options.trials_per_task)
    for field in ("build_workers", "verify_rounds"):
        value = getattr(options, field)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise _invalid(function, f"options.{field}", value, "expected an integer >= 1")
    for field in ("compile_timeout_s", "run_timeout_s", "min_time_s"):
        value = getattr(options, field)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < float("inf"):
            raise _invalid(function, f"options.{field}", value, "expected a positive number of seconds")
    if options.cost_model is not None and not Path(options.cost_model).is_file():
        raise _invalid(function, "options.cost_model", options.cost_model, "no such file")


def check_trials_per_task(function: str, name: str, value: object) -> None:
    """None (the budget is `trials` in all) or a per-task budget in `trials-per-task`'s domain."""
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise _invalid(function, name, value, "expected None or an integer >= 1")
    check_option(function, name, str(value), option_name="trials-per-task")


def as_source(source: object) -> object:
    """A `str` that looks like a file name becomes a `Path`; a `Path` stays one; anything else is as given."""
    if isinstance(source, str) and _names_a_file(source):
        return source if is_factory_reference(source) else Path(source)
    return source


def _names_a_file(text: str) -> bool:
    if not text or len(text) > MAX_PATH_CHARS or "\n" in text or "\0" in text:
        return False
    if is_factory_reference(text) or text.lower().endswith(PATH_SUFFIXES):
        return True
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def _read_file(path: Path, name: str | None) -> tuple[str, str]:
    """A `.mlir` file's text; refuses what is not a regular file (a FIFO would hang) or is too large."""
    what = name or str(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise AnsorError(f"{what}: no such file") from None
    except (OSError, ValueError) as exc:
        raise AnsorError(f"{what}: cannot read: {exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise AnsorError(f"{what}: not a regular file: give a .mlir or .onnx file, or MLIR text")
    if info.st_size > 4 * MAX_TEXT_CHARS:
        raise AnsorError(f"{what}: {info.st_size} bytes, more MLIR than this tool parses")
    try:
        return path.read_text(encoding="utf-8"), what
    except (OSError, UnicodeDecodeError) as exc:
        raise AnsorError(f"{what}: cannot read: {exc}") from None


def read_source(source: str | Path | ModelSource | Any, name: str | None = None) -> tuple[str, str]:
    """(text, name) of a module given as MLIR text (`str`), a file (`Path`, or a `str` naming one), or a model."""
    program = read_program(source, name)
    return program.text, program.name


def read_program(source: str | Path | ModelSource | Any, name: str | None = None) -> UserProgram:
    """The program of a module given as MLIR text (`str`), a file (`Path`, or a `str` naming one), or a model.

    Models (a `.onnx` path, `file.py:factory`, an `onnx.ModelProto`, a
    `(torch.nn.Module, example_inputs)` pair, a `ModelSource`) are imported by
    `load_model`; their text names the weights as parameters (see `compile`).
    """
    if name is not None and not isinstance(name, str):
        raise _invalid("ansor_mlir", "name", name, "expected a str or None")
    source = as_source(source)
    if isinstance(source, Path) and not is_model_reference(str(source)):
        return UserProgram(*_read_file(source, name))
    if isinstance(source, str) and not is_model_reference(source):
        return UserProgram(source, name or "<input>")
    if source is None or isinstance(source, (bytes, int, float, bool, list, dict, set)):
        raise AnsorError(f"cannot read a module from a {type(source).__name__}: give MLIR text, a .mlir/.onnx "
                         "path, file.py:factory, an onnx.ModelProto or a torch.nn.Module with example inputs")
    model = load_model(source, name=name)
    return UserProgram(model.text, model.name, model.parameters, model.scope)


def rewritten(function: str, text: str, name: str, rewrites: str) -> RewrittenProgram:
    """The program `function` works on: `text` after the program rewrites `rewrites` names (`none`: as given)."""
    check_option(function, "rewrites", rewrites)
    return rewrite_program(text, parse_rewrites(rewrites), name)


def resolve_target(target: str | Target) -> Target:
    """A target as IREE resolves it (its CPU's name, features, vector width and limits): records are keyed by it."""
    check_target("resolve_target", target)
    if isinstance(target, Target):
        return target if target.resolved_cpu else resolve_cpu_target(target)
    return resolve_cpu_target(parse_target(target))


def extract_tasks(
    module: str | Path, target: str | Target = "llvm-cpu", name: str | None = None,
    rewrites: str = DEFAULT_REWRITES,
) -> list[Task]:
    """The unique, weighted tasks (dispatches) of a linalg module (after its program rewrites)."""
    check_target("extract_tasks", target)
    text, name = read_source(module, name)
    return _extract_tasks(rewritten("extract_tasks", text, name, rewrites).text, resolve_target(target), name)


def generate_sketches(task: Task, target: str | Target = "llvm-cpu") -> list[Sketch]:
    """The sketches of a task; sketch zero is IREE's own configuration."""
    check_type("generate_sketches", "task", task, Task, "a Task (from extract_tasks)")
    return _generate_sketches(task, resolve_target(target))


@dataclass(frozen=True)
class TuneResult:
    """The tuned module, each task's result, the log, and the runtime device the tuned program runs fastest on
    (`tuning.device_choice`: at threads > 1, `local-sync` unless IREE's task system beats one thread)."""

    module: str
    tasks: list[TaskResult]
    log: Path
    device: str
    device_choice: DeviceChoice | None = None
    # Whether the program rewrites paid off (`tuning.rewrite_check`); None when none applied. When they did not,
    # `module` is the program as given, which IREE builds with its defaults.
    rewrite_check: RewriteCheck | None = None
    # At threads > 1 with `one_thread_share`, each task's result on one thread, before `tasks`
    # (`tuning.one_thread_start`).
    one_thread: list[TaskResult] = dataclasses.field(default_factory=list)



def _build_hint(changed: RewrittenProgram) -> str:
    """What a user building the flow-level output by hand must add, for rewrites that need it."""
    if not set(FUSED_PAD_REWRITES) & set(changed.names):
        return ""
    return f"; build the flow-level output with `iree-compile {FLOW_PAD_FLAG}` (fused pads)"

def tune(
    module: str | Path,
    target: str | Target = "llvm-cpu",
    trials: int = 32,
    log: str | Path = "ansor_tuning.jsonl",
    seed: int = 0,
    policy: str = "evolutionary",
    progress: bool = True,
    options: TuneOptions | None = None,
    name: str | None = None,
    callbacks: Sequence[TuningCallback] = (),
    cluster: str | None = None,
    trials_per_task: int | None = None,
    task_scheduler: str = "gradient",
    rewrites: str = DEFAULT_REWRITES,
) -> TuneResult:
    """Tune every task of a module; returns the module with the best configurations attached.

    `trials` is the model's budget, shared out by `task_scheduler` (`gradient`: Ansor's, or
    `round-robin`); `trials_per_task` gives every task that many instead.
    `callbacks` hear of the run's progress, beside the console's notes (and bar and table with `progress`).
    `cluster` (a Dask scheduler's address, `tcp://host:8786`) builds and measures on its workers
    (`measure.dask_engine`); it overrides `options.cluster`.
    `rewrites` (`frontend.program_rewrites`) are applied to the program first: its tasks, the records
    (which name them) and the returned module are the rewritten program's.
    """
    check_target("tune", target)
    if cluster is not None:
        cluster = check_option("tune", "cluster", cluster)
    if options is None:
        check_option("tune", "trials", trials)
        check_trials_per_task("tune", "trials_per_task", trials_per_task)
        check_option("tune", "task_scheduler", task_scheduler, option_name="task-scheduler")
        check_option("tune", "log", log)
        check_option("tune", "seed", seed)
        check_option("tune", "policy", policy)
        check_type("tune", "progress", progress, bool, "True or False")
        opts = TuneOptions(trials=trials, trials_per_task=trials_per_task, task_scheduler=task_scheduler,
                           log=Path(log), seed=seed, policy=policy, progress=progress)
    else:
        check_type("tune", "options", options, TuneOptions, "a TuneOptions")
        check_tune_options("tune", options)
        opts = dataclasses.replace(options, log=Path(options.log))
    check_callbacks("tune", callbacks)
    if cluster is not None:
        opts = dataclasses.replace(opts, cluster=cluster)
    elif opts.cluster is not None:
        check_option("tune", "options.cluster", opts.cluster, option_name="cluster")
    given = read_program(module, name)
    name = given.name
    changed = rewritten("tune", given.text, name, rewrites)
    text = changed.text
    program = dataclasses.replace(given, text=text)
    opts = dataclasses.replace(opts, rewrites=changed.names)
    if changed.applied:
        for callback in (ConsoleProgress(progress=opts.progress), *callbacks):
            callback.on_note(f"{name}: program rewritten before tuning: {changed.summary()}{_build_hint(changed)}")
    tgt = resolve_target(target)
    no_device = no_device_message(tgt) if opts.trials > 0 else None
    if no_device is not None:
        raise AnsorError(no_device)
    if not tgt.runs_here and opts.trials > 0:
        return _tune_emulated(text, name, tgt, opts, callbacks)
    wakeup = threaded_timing_note(tgt.threads) if opts.trials > 0 else None
    if wakeup is not None:
        for callback in (ConsoleProgress(progress=opts.progress), *callbacks):
            callback.on_note(wakeup)
    if opts.trials == 0 and opts.trials_per_task is None:
        tuner = Tuner(tgt, opts, callbacks=[ConsoleProgress(progress=opts.progress), *callbacks])
        tuner.predict_tasks(tuner.tunable_tasks(text, name))
        return TuneResult(apply_best(text, opts.log, tgt, name, NO_REWRITES), [], opts.log, tgt.runtime_device())
    tasks = tunable_tasks(text, name, tgt, [ConsoleProgress(progress=opts.progress), *callbacks])
    start = one_thread_start(tgt, opts, len(tasks))
    first: list[TaskResult] = []
    if start is not None:
        for callback in (ConsoleProgress(progress=opts.progress), *callbacks):
            callback.on_note(start.note(tgt.threads))
        first = Tuner(start.target, start.first, callbacks=[ConsoleProgress(progress=opts.progress), *callbacks]
                      ).tune_tasks(tasks, program=program)
        opts = start.rest
    results = Tuner(tgt, opts, callbacks=[ConsoleProgress(progress=opts.progress), *callbacks]
                    ).tune_tasks(tasks, program=program)
    kept, choice = (None, None) if opts.cluster else _program_choices(
        given, program, changed.applied, tgt, opts, callbacks, start.target if start is not None else None)
    record = record_choices(opts.log, tgt, given.text, name, changed.names, kept, choice)
    # Where the rewrites lost, the module is the program as given, as the recorded choice makes it for
    # `apply_best` (`tuning.program_choice`); this run's choice is at hand, so neither is rewritten or keyed again.
    # On one thread it applies the one-thread search's choices where the device choice took them.
    dropped = kept is not None and not kept.kept
    module_text = _with_best(given.text if dropped else text, name, opts.log, records_target(tgt, record))
    return TuneResult(module_text, results, opts.log, choice.device if choice else tgt.runtime_device(), choice,
                      kept, first)


def _program_choices(given: UserProgram, program: UserProgram, rewritten: bool, target: Target,
                     options: TuneOptions, callbacks: Sequence[TuningCallback], one_thread: Target | None = None,
                     ) -> tuple[RewriteCheck | None, DeviceChoice | None]:
    """The program-level choices after tuning, each timed alternately with one builder and runner and the log's
    tuning spec: with `rewritten`, whether the tuned rewritten program beats IREE's default of the program as
    given (`tuning.rewrite_check`); at threads > 1, on which device the kept program runs fastest
    (`tuning.device_choice`), on one thread with the records of `one_thread` (the run's one-thread phase).
    The user hears each choice and by how much."""
    if not rewritten and not alternatives(target):
        return None, None
    builder = LocalBuilder(target, workers=options.build_workers, timeout_s=options.compile_timeout_s)
    runner = LocalRunner(target, timeout_s=options.run_timeout_s, min_time_s=options.min_time_s)
    listeners = (ConsoleProgress(progress=options.progress), *callbacks)
    kept = choice = None
    try:
        spec = tuning_spec(program.text, program.name, options.log, target)
        if rewritten:
            kept = check_rewrites(builder, runner, given, program, spec, options.seed)
            for callback in listeners:
                callback.on_note(kept.note(program.name, "+".join(options.rewrites)))
            if not kept.kept:
                program, spec, one_thread = given, None, None  # IREE's default of the program as given
        if alternatives(target):
            alone = _one_thread_choices(program, options.log, one_thread)
            # IREE's default build of the user's program: what the user has without tuning, on the threaded device.
            untuned = spec is None and program.text == given.text
            choice = choose_device(target, builder, runner, program, spec, options.seed, one_thread=alone,
                                   untuned=untuned)
            for callback in listeners:
                callback.on_note(choice.note(program.name, target.threads))
    finally:
        builder.close()
        runner.close()
    return kept, choice


def _one_thread_choices(program: UserProgram, log: Path, one_thread: Target | None) -> OneThreadChoices | None:
    """The one-thread phase's best choices for `program` (None: the run had no such phase, or it left no record
    of this machine to apply)."""
    if one_thread is None:
        return None
    try:
        return OneThreadChoices(tuning_spec(program.text, program.name, log, one_thread))
    except AnsorError:
        return None


def _tune_emulated(text: str, name: str, target: Target, options: TuneOptions,
                   callbacks: Sequence[TuningCallback]) -> TuneResult:
    """A target whose programs do not run here: the cost model ranks, qemu verifies, nothing is timed."""
    runtime = find_emulated_runtime(target.arch)
    if isinstance(runtime, str):
        raise AnsorError(f"target {target.arch}:{target.cpu}: its programs do not run on this host, and {runtime}; "
                         "or pick by the cost model alone (trials=0, unverified), or measure on the real machine "
                         "(ansor-measure export)")
    tune_by_model(text, name, target, options, runtime, [ConsoleProgress(progress=False), *callbacks])
    return TuneResult(apply_best(text, options.log, target, name, NO_REWRITES), [], options.log,
                      target.runtime_device())


def _best_for_target(log: str | Path, target: Target) -> dict[str, Record]:
    path = Path(check_option("ansor_mlir", "log", log, "ansor-apply-best"))
    if not path.exists():
        raise AnsorError(f"tuning log {path} does not exist: run --ansor-tune with log={path} first")
    records = read_records(path)
    best = best_records(records, target.key, target.fingerprint)
    if records and not best:
        others = sorted({r.fingerprint or r.target for r in records})
        raise AnsorError(f"tuning log {path} has no record for this machine, {target.fingerprint} (it has "
                         f"{', '.join(others)}): tune on this machine, or name the target the log was tuned for")
    return best


def apply_best(
    module: str | Path, log: str | Path, target: str | Target = "llvm-cpu", name: str | None = None,
    rewrites: str = DEFAULT_REWRITES,
) -> str:
    """The module after its program rewrites, lowered by IREE to dispatches, with the best recorded
    configuration on each.

    Plain `iree-compile` builds the result into the tuned program. Records for
    another target are never applied.
    """
    check_target("apply_best", target)
    check_option("apply_best", "log", log, "ansor-apply-best")
    text, name = read_source(module, name)
    tgt = resolve_target(target)
    changed = rewritten("apply_best", text, name, rewrites)
    choice = recorded_choice(log, text, name, changed, tgt)
    return _with_best(chosen_text(text, changed, choice), name, log, records_target(tgt, choice))


def _with_best(text: str, name: str, log: str | Path, tgt: Target) -> str:
    """The program `text` (already rewritten, or not, as chosen) lowered to dispatches with the log's best
    configuration on each."""
    validate_input(text, name)
    best = _best_for_target(log, tgt)
    flow = compile_to_phase(text, tgt.compile_flags(), "flow", name)
    tasks = tasks_from_flow(flow, tgt, name)  # the flow above: not a second compile
    chosen = as_the_spec_applies(tasks, {key: r for key, r in best.items() if not r.is_default})
    configs = {task.key: (task.root_index, record.config) for task, record in chosen
               if record.family is not Family.TRANSFORM}
    strategies = best_strategies([task for task, _ in chosen], {t.key: r for t, r in chosen}, tgt)
    tuned, _ = attach_configs(flow, configs, name, strategies)
    return flow_build_line(tgt) + tuned


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
            upgraded = upgrade_legacy([record], task.key, _generate_sketches(task, target))
            if not upgraded:
                raise AnsorError(
                    f"tuning log: task {task.name} record names transform sketch {record.candidate.sketch_index}, "
                    "which this version does not derive: retune with a fresh log"
                )
            record = upgraded[0]
        strategy = strategy_name(task, record.candidate)
        out[task.key] = (strategy, render_strategy(record.sketch, record.candidate, task, strategy))
    return out


def emit_transform_library(
    module: str | Path, log: str | Path, target: str | Target = "llvm-cpu", name: str | None = None,
    rewrites: str = DEFAULT_REWRITES,
) -> str:
    """A transform library with the best strategy of every task tuned with the transform family.

    For ordinary IREE flows: `iree-compile IN.mlir --iree-codegen-transform-dialect-library=LIB`.
    Its `@__kernel_config` matches each dispatch function by its root op and
    shape and points it at its strategy.
    """
    check_target("emit_transform_library", target)
    check_option("emit_transform_library", "log", log, "ansor-emit-transform-library")
    text, name = read_source(module, name)
    tgt = resolve_target(target)
    text, applied = for_ordinary_flows("emit_transform_library", text, name, rewrites, "transform library", log,
                                       tgt)
    best = _best_for_target(log, applied)
    tasks = _extract_tasks(text, tgt, name)
    strategies = best_strategies(tasks, best, applied)
    by_key = {t.key: t for t in tasks}
    return render_library([(by_key[key], *strategies[key]) for key in sorted(strategies)])


def emit_tuning_spec(
    module: str | Path, log: str | Path, target: str | Target = "llvm-cpu", name: str | None = None,
    rewrites: str = DEFAULT_REWRITES,
) -> str:
    """One tuning spec with the best configuration of every task of the module, transform strategies included.

    For ordinary IREE flows: `iree-compile IN.mlir --iree-codegen-tuning-spec-path=SPEC`, nothing else: a task
    whose best record is a transform strategy gets the strategy in the spec, which runs it on the dispatch.
    Where a program rewrite changes the module, the spec matches the rewritten program's dispatches: compile
    that program (`ansor-opt IN --ansor-rewrite -o REWRITTEN.mlir`) with it, and a warning says so.
    """
    check_target("emit_tuning_spec", target)
    check_option("emit_tuning_spec", "log", log, "ansor-emit-tuning-spec")
    text, name = read_source(module, name)
    tgt = resolve_target(target)
    text, applied = for_ordinary_flows("emit_tuning_spec", text, name, rewrites, "tuning spec", log, tgt)
    spec = tuning_spec(text, name, log, applied)
    if spec is None:
        warnings.warn(f"{name}: the tuning spec configures nothing: the log's best for every task of this program is "
                      "IREE's default (no candidate measured faster, or none faster in the whole program)",
                      stacklevel=2)
        return render_spec([])
    return spec


def tuning_spec(text: str, name: str, log: str | Path, target: Target) -> str | None:
    """The spec applying the best record of each task of `text` (as given: no rewrites), or None when every
    task's best is IREE's own configuration. A task whose root op the spec cannot match (`unmatchable`) is left
    to IREE's default, with a warning."""
    tasks = _extract_tasks(text, target, name)
    best = _best_for_target(log, target)
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


def for_ordinary_flows(function: str, text: str, name: str, rewrites: str, what: str, log: str | Path,
                       target: Target) -> tuple[str, Target]:
    """The rewritten program a spec or library is made for, warning when it is not the input: IREE compiling
    the input would form other dispatches, and the rewritten ones' entries would match nothing. Where the log
    records that the rewrites lost to the program as given (`tuning.program_choice`), the program as given.
    Beside it, the target whose records it applies (`program_choice.records_target`)."""
    changed = rewritten(function, text, name, rewrites)
    choice = recorded_choice(log, text, name, changed, target)
    applied = records_target(target, choice)
    if choice is not None and not choice.rewrites_kept:
        return text, applied
    if changed.applied:
        warnings.warn(f"{name}: the {what} is for the program after rewrites {changed.summary()}, not for this "
                      f"input: compile that program with it (ansor-opt IN --ansor-rewrite="
                      f"\"rewrites={rewrites}\" -o REWRITTEN.mlir), or tune with rewrites=none", stacklevel=3)
    return changed.text, applied


# Whole models compile for longer and in more memory than one task's candidates.
MODEL_COMPILE_TIMEOUT_S = 1800.0
MODEL_COMPILE_MEMORY_BYTES = 16 * 1024**3


def compile(
    model: str | Path | ModelSource | Any,
    target: str | Target = "llvm-cpu",
    log: str | Path | None = None,
    example_inputs: Sequence[Any] | Any | None = None,
    *,
    name: str | None = None,
    embed_parameters: bool = True,
    rewrites: str = DEFAULT_REWRITES,
    device: str | None = None,
) -> CompiledModel:
    """The model built by IREE with the best recorded configuration of each task: a runnable module.

    Without `log`, IREE's own configurations (the untuned baseline, built from
    the same imported IR after the same program rewrites; `rewrites="none"`:
    the IR as imported), with ansor-mlir's codegen flags as every build here
    (`Target.codegen_flags`: reassociated FP reductions). With it, the same build plus a tuning spec carrying
    the records (`--iree-codegen-tuning-spec-path`), so a task whose best is
    IREE's default is built exactly as the baseline builds it (re-entering
    IREE at its dispatches instead ran a model's weight transforms on every
    call: ResNet-50 3x slower with no configuration attached). The weights are embedded in the program
    (`--iree-parameter-import`), or with `embed_parameters=False` kept beside
    it and handed to the runtime as a parameter provider. `device` is the runtime device it runs on: the
    target's by default; `TuneResult.device` names the one the tuned program ran fastest on.
    """
    check_target("compile", target)
    if log is not None:
        check_option("compile", "log", log, "ansor-apply-best")
    check_type("compile", "embed_parameters", embed_parameters, bool, "True or False")
    if name is not None and not isinstance(name, str):
        raise _invalid("compile", "name", name, "expected a str or None")
    source = load_model(as_source(model), example_inputs, name=name)
    tgt = resolve_target(target)
    changed = rewritten("compile", source.text, source.name, rewrites)
    choice = recorded_choice(log, source.text, source.name, changed, tgt)
    devices = tuple(dict.fromkeys((tgt.runtime_device(), *alternatives(tgt))))
    runtime = device or (choice.device if choice is not None and choice.device in devices else tgt.runtime_device())
    if runtime not in devices:
        raise _invalid("compile", "device", device, f"expected {' or '.join(devices)} for target {tgt.key}")
    text = chosen_text(source.text, changed, choice)
    # The recorded device's records (the one-thread search's on one thread), unless `device` overrides it.
    applied = records_target(tgt, choice) if choice is not None and runtime == choice.device else tgt
    spec = tuning_spec(text, source.name, log, applied) if log is not None else None
    built_for = build_target(tgt, runtime)  # on one thread: no fences (`tuning.device_choice`)
    vmfb, why = _build_model(source, text, built_for, spec, embed_parameters)
    if vmfb is None and spec is not None:
        warnings.warn(f"{source.name}: IREE could not build the model with the log's tuning spec ({why}); built "
                      "IREE's default instead: emit the spec (ansor-opt --ansor-emit-tuning-spec) to find the entry "
                      "it rejects, or tune again (whole-program checks reject a candidate whose spec fails)",
                      stacklevel=2)
        vmfb, why = _build_model(source, text, built_for, None, embed_parameters)
    if vmfb is None:
        raise AnsorError(f"{source.name}: IREE could not compile it: {why}")
    kept = b"" if embed_parameters else source.parameters
    return CompiledModel(vmfb, source.entry, runtime, kept, source.scope)


def _build_model(source: ModelSource, text: str, target: Target, spec: str | None, embed_parameters: bool,
                 ) -> tuple[bytes | None, str]:
    """The model's `.vmfb` built from `text` (with `spec`, a tuning spec), or None and IREE's first error."""
    with tempfile.TemporaryDirectory(prefix="ansor-compile-") as tmp:
        flags = target.compile_flags()
        if spec is not None:
            (Path(tmp) / "spec.mlir").write_text(spec)
            flags = [*flags, *tuning_spec_flags(Path(tmp) / "spec.mlir")]
        if source.parameters and embed_parameters:
            flags = [*flags, *source.import_flags(source.write_parameters(Path(tmp) / "weights.irpa"))]
        out = Path(tmp) / "model.vmfb"
        result = compile_vmfb(text, flags, out, timeout_s=MODEL_COMPILE_TIMEOUT_S,
                              memory_bytes=MODEL_COMPILE_MEMORY_BYTES)
        if not result.ok:
            return None, first_error_line(result.stderr)
        return out.read_bytes(), ""


def run_pipeline(
    module: ir.Module | str | Path,
    pipeline: str | Sequence[str | PassInvocation],
    name: str | None = None,
    after_pass: AfterPass | None = None,
) -> PipelineResult:
    """Run `ansor-opt` passes on a module object (or MLIR text, or a file) and get module objects back.

    `pipeline` is a `--pass-pipeline` string or a list of passes (`"ansor-tune{trials=8}"`);
    `result.module` is the last pass's output and `result.after` every pass's output, as IR objects.
    """
    if not isinstance(pipeline, str) and not (
        isinstance(pipeline, Sequence) and all(isinstance(p, (str, PassInvocation)) for p in pipeline)
    ):
        raise _invalid("run_pipeline", "pipeline", pipeline, "expected a --pass-pipeline string or a list of passes")
    if not isinstance(module, (ir.Module, str, Path)) and not is_model_object(module):
        raise _invalid("run_pipeline", "module", module, "expected an ir.Module, MLIR text, a file or a model")
    if name is not None and not isinstance(name, str):
        raise _invalid("run_pipeline", "name", name, "expected a str or None")
    module = as_source(module) if isinstance(module, str) else module
    toolkit = Toolkit(tune=tune, apply_best=apply_best, emit_tuning_spec=emit_tuning_spec,
                      emit_transform_library=emit_transform_library)
    return _run_pipeline(module, pipeline, toolkit, name, after_pass)


def export_batch(
    module: str | Path, path: str | Path, target: str | Target = "llvm-cpu", candidates: int = 8,
    log: str | Path = "ansor_tuning.jsonl", seed: int = 0, threads: int = 1, name: str | None = None,
    rewrites: str = DEFAULT_REWRITES,
) -> ExportSummary:
    """A batch for a machine reached only by copying files: per task up to `candidates` new candidates (ranked by
    the cost model, taught by `log`) and IREE's default, built for `target`, with inputs and references.

    Measure it there with `python -m ansor_mlir.measure.offline_runner BATCH RESULTS` (IREE's runtime and
    numpy only), then `import_results(BATCH, RESULTS, log)`; export again for the next round.
    """
    check_target("export_batch", target)
    check_option("export_batch", "candidates", candidates, option_name="batch")
    check_option("export_batch", "log", log)
    check_option("export_batch", "seed", seed)
    check_option("export_batch", "threads", threads, option_name="threads")
    if not isinstance(path, (str, Path)) or not str(path):
        raise _invalid("export_batch", "path", path, "expected a .zip file or a directory name")
    text, name = read_source(module, name)
    changed = rewritten("export_batch", text, name, rewrites)
    tgt = resolve_target(dataclasses.replace(parse_target(target), threads=threads) if isinstance(target, str)
                         else target)
    options = TuneOptions(log=Path(log), seed=seed, batch_size=candidates, progress=False, rewrites=changed.names)
    text = changed.text
    return _export_batch(text, name, tgt, options, Path(path))


def import_results(batch: str | Path, results: str | Path, log: str | Path = "ansor_tuning.jsonl") -> list[Record]:
    """Append a batch's measurements (the offline runner's RESULTS file) to the tuning log as records."""
    check_option("import_results", "log", log)
    for label, value in (("batch", batch), ("results", results)):
        if not isinstance(value, (str, Path)) or not Path(value).exists():
            raise _invalid("import_results", label, value, "no such file or directory")
    return _import_results(Path(batch), Path(results), Path(log))

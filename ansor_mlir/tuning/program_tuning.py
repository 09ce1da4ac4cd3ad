"""Tuning a whole program, phase by phase: what `ansor_mlir.tune` and `ansor-opt --ansor-tune` run.

    rewrite -> (emulated | predicted | [one-thread start ->] search -> program choices -> record) -> tuned module

Each phase is one function here, working on a `TuneRun` (the program as given and as rewritten, the target,
the options) and telling one list of listeners (the console's progress is one of them) what it does.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.model_source import reads_parameters
from ansor_mlir.frontend.pad_fusion import NAMES as FUSED_PAD_REWRITES
from ansor_mlir.frontend.program_rewrites import RewrittenProgram, parse_rewrites, rewrite_program
from ansor_mlir.measure.gpu_device import no_device_message
from ansor_mlir.measure.idle_wakeup import threaded_timing_note
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.measure.local_runner import LocalRunner
from ansor_mlir.measure.qemu_runner import find_emulated_runtime
from ansor_mlir.mlir.iree_compiler import FLOW_PAD_FLAG
from ansor_mlir.tuning.apply import tuned_module, tuning_spec
from ansor_mlir.tuning.budget_outlook import budget_note, with_scaled_trials
from ansor_mlir.tuning.callbacks import TuningCallback
from ansor_mlir.tuning.cross_tuning import tune_by_model
from ansor_mlir.tuning.device_choice import DeviceChoice, OneThreadChoices, alternatives, choose_device
from ansor_mlir.tuning.one_thread_start import OneThreadStart, one_thread_start
from ansor_mlir.tuning.options import TuneOptions
from ansor_mlir.tuning.program_choice import chosen_text, record_choices, recorded_choice, records_target
from ansor_mlir.tuning.progress import ConsoleProgress
from ansor_mlir.tuning.rewrite_check import RewriteCheck, check_rewrites
from ansor_mlir.tuning.task_result import TaskResult
from ansor_mlir.tuning.tuner import Tuner, tunable_tasks
from ansor_mlir.tuning.verification import UserProgram


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


@dataclass(frozen=True)
class TuneRun:
    """What every phase of one tune works with."""

    given: UserProgram  # the program as the user gave it
    program: UserProgram  # after its rewrites
    changed: RewrittenProgram
    target: Target
    options: TuneOptions
    listeners: tuple[TuningCallback, ...]

    @property
    def name(self) -> str:
        return self.given.name

    def note(self, message: str) -> None:
        for listener in self.listeners:
            listener.on_note(message)


def tune_program(given: UserProgram, target: Target, options: TuneOptions, rewrites: str,
                 callbacks: Sequence[TuningCallback] = ()) -> TuneResult:
    """Tune every task of `given` after its `rewrites`; the module with the best configurations attached."""
    run = rewrite_phase(given, target, options, rewrites, (ConsoleProgress(progress=options.progress), *callbacks))
    measured = options.trials != 0
    no_device = no_device_message(target) if measured else None
    if no_device is not None:
        raise AnsorError(no_device)
    if measured and target.runs_here and reads_parameters(given.text, given.name) and not given.parameters:
        raise AnsorError(f"{given.name}: the program reads its weights from a parameter archive that was not "
                         "given, and tuning runs the whole program: keep the .irpa written with it beside it "
                         "(NAME.irpa), or pass it (Python: run_pipeline(..., parameters=) or a ModelSource)")
    if not target.runs_here and measured:
        return emulation_phase(run)
    wakeup = threaded_timing_note(target.threads) if measured else None
    if wakeup is not None:
        run.note(wakeup)
    if options.trials == 0 and options.trials_per_task is None:
        return prediction_phase(run)
    tasks = tunable_tasks(run.program.text, run.name, target, run.listeners)
    run.note(budget_note(options.trials, options.trials_per_task, options.time_budget, len(tasks)))
    options = with_scaled_trials(options, len(tasks))
    started = time.monotonic()
    start = one_thread_start(target, options, len(tasks))
    first = one_thread_phase(run, start, tasks) if start is not None else []
    rest = start.rest if start is not None else options
    if start is not None and rest.time_budget is not None:  # what the one-thread phase left of the time budget
        rest = dataclasses.replace(rest, time_budget=max(rest.time_budget - (time.monotonic() - started), 1e-3))
    results = Tuner(target, rest, callbacks=run.listeners).tune_tasks(tasks, program=run.program)
    kept, choice = (None, None) if rest.cluster else program_choice_phase(run, start.target if start else None)
    return record_phase(run, results, first, kept, choice)


def rewrite_phase(given: UserProgram, target: Target, options: TuneOptions, rewrites: str,
                  listeners: tuple[TuningCallback, ...]) -> TuneRun:
    """The program rewritten before tuning (its tasks, records and module are the rewritten program's)."""
    changed = rewrite_program(given.text, parse_rewrites(rewrites), given.name)
    run = TuneRun(given, dataclasses.replace(given, text=changed.text), changed, target,
                  dataclasses.replace(options, rewrites=changed.names), listeners)
    if changed.applied:
        run.note(f"{given.name}: program rewritten before tuning: {changed.summary()}{build_hint(changed)}")
    return run


def build_hint(changed: RewrittenProgram) -> str:
    """What a user building the flow-level output by hand must add, for rewrites that need it."""
    if not set(FUSED_PAD_REWRITES) & set(changed.names):
        return ""
    return f"; build the flow-level output with `iree-compile {FLOW_PAD_FLAG}` (fused pads)"


def emulation_phase(run: TuneRun) -> TuneResult:
    """A target whose programs do not run here: the cost model ranks, qemu verifies, nothing is timed."""
    target, options = run.target, run.options
    runtime = find_emulated_runtime(target.arch)
    if isinstance(runtime, str):
        raise AnsorError(f"target {target.arch}:{target.cpu}: its programs do not run on this host, and {runtime}; "
                         "or pick by the cost model alone (trials=0, unverified), or measure on the real machine "
                         "(ansor-measure export)")
    tune_by_model(run.program.text, run.name, target, options, runtime, run.listeners)
    return TuneResult(best_module(run), [], options.log, target.runtime_device())


def prediction_phase(run: TuneRun) -> TuneResult:
    """Zero trials: per task the cost model's best pick that compiles, nothing run or timed."""
    tuner = Tuner(run.target, run.options, callbacks=run.listeners)
    tuner.predict_tasks(tuner.tunable_tasks(run.program.text, run.name))
    return TuneResult(best_module(run), [], run.options.log, run.target.runtime_device())


def best_module(run: TuneRun) -> str:
    """The rewritten program with the log's best records, as `apply_best` gives it with no further rewrites."""
    unchanged = rewrite_program(run.program.text, (), run.name)
    choice = recorded_choice(run.options.log, run.program.text, run.name, unchanged, run.target)
    return tuned_module(chosen_text(run.program.text, unchanged, choice), run.name, run.options.log,
                        records_target(run.target, choice))


def one_thread_phase(run: TuneRun, start: OneThreadStart, tasks: list[Task]) -> list[TaskResult]:
    """At threads > 1, part of the trials (and of the time budget) on one thread first
    (`tuning.one_thread_start`)."""
    run.note(start.note(run.target.threads))
    first = start.first
    if first.time_budget is not None:
        first = dataclasses.replace(first, time_budget=first.time_budget * run.options.one_thread_share)
    return Tuner(start.target, first, callbacks=run.listeners).tune_tasks(tasks, program=run.program)


def program_choice_phase(run: TuneRun, one_thread: Target | None) -> tuple[RewriteCheck | None, DeviceChoice | None]:
    """The program-level choices after tuning, each timed alternately with one builder and runner and the log's
    tuning spec: where rewrites applied, whether the tuned rewritten program beats IREE's default of the program
    as given (`tuning.rewrite_check`); at threads > 1, on which device the kept program runs fastest
    (`tuning.device_choice`), on one thread with the records of `one_thread` (the run's one-thread phase).
    The listeners hear each choice and by how much."""
    target, options, given, program = run.target, run.options, run.given, run.program
    rewritten = run.changed.applied
    if not rewritten and not alternatives(target):
        return None, None
    builder = LocalBuilder(target, workers=options.build_workers, timeout_s=options.compile_timeout_s)
    runner = LocalRunner(target, timeout_s=options.run_timeout_s, min_time_s=options.min_time_s)
    kept = choice = None
    try:
        spec = tuning_spec(program.text, program.name, options.log, target)
        if rewritten:
            kept = check_rewrites(builder, runner, given, program, spec, options.seed)
            run.note(kept.note(program.name, "+".join(options.rewrites)))
            if not kept.kept:
                program, spec, one_thread = given, None, None  # IREE's default of the program as given
        if alternatives(target):
            alone = _one_thread_choices(program, options.log, one_thread)
            # IREE's default build of the user's program: what the user has without tuning, on the threaded device.
            untuned = spec is None and program.text == given.text
            choice = choose_device(target, builder, runner, program, spec, options.seed, one_thread=alone,
                                   untuned=untuned)
            run.note(choice.note(program.name, target.threads))
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


def record_phase(run: TuneRun, results: list[TaskResult], first: list[TaskResult], kept: RewriteCheck | None,
                 choice: DeviceChoice | None) -> TuneResult:
    """The choices appended to the log, and the tuned module they make.

    Where the rewrites lost, the module is the program as given, as the recorded choice makes it for
    `apply_best` (`tuning.program_choice`); this run's choice is at hand, so neither is rewritten or keyed
    again. On one thread it applies the one-thread search's choices where the device choice took them.
    """
    target, log = run.target, run.options.log
    record = record_choices(log, target, run.given.text, run.name, run.changed.names, kept, choice)
    dropped = kept is not None and not kept.kept
    module = tuned_module(run.given.text if dropped else run.program.text, run.name, log,
                          records_target(target, record))
    return TuneResult(module, results, log, choice.device if choice else target.runtime_device(), choice, kept,
                      first)


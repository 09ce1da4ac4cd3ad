"""Tuning for a CPU this host cannot run natively: the cost model ranks, qemu verifies, nothing is timed.

An `aarch64:neoverse-v1` program built on an x86-64 host runs here only under
qemu-user, whose speed says nothing about the real CPU. So with no ARM host
at hand the tuner does what it can do honestly: per task it asks the search
policy's cost model for its best candidates (a model trained on measurements;
records of this target already in the log, from a batch measured on the real
machine, teach it first), builds them for the target, and runs them under
qemu against IREE's default build for this host (an independent compilation
of the same task). The first pick whose outputs match is chosen and logged
`not_measured` ("ranked by the cost model, verified under qemu"); picks that
fail are logged with their error; when none passes, IREE's default is kept,
itself verified. Any real measurement of the target in the log wins over
these picks (`database.records.best_records`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.schedule import Candidate, Sketch
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.database.records import Record, TuningLog, now, producer_versions, read_records, task_history
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.target_resolution import parse_resolved_target
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.builder import BuildInput, BuiltProgram
from ansor_mlir.measure.inputs import check_inputs, encode_array, make_inputs
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.measure.local_runner import LocalRunner
from ansor_mlir.measure.qemu_runner import EmulatedRuntime, QemuRunner
from ansor_mlir.measure.runner import RunInput
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.space.resolve import render_config
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.callbacks import TuningCallback
from ansor_mlir.tuning.options import make_search_policy
from ansor_mlir.tuning.tuner import TuneOptions, build_input, task_module


@dataclass(frozen=True)
class VerifiedChoice:
    """One task's outcome: the record applied (a verified pick, or IREE's verified default) and what was tried."""

    task: Task
    chosen: Record
    # Model picks built and run under qemu before one passed, with their outcome (the chosen one last).
    tried: tuple[Record, ...]
    default: Record

    @property
    def is_default(self) -> bool:
        return self.chosen.is_default


# Cost-model picks tried per task until one passes under the emulator, where the run names no trials.
DEFAULT_PICKS = 32

def emulation_note(target: Target, runtime: EmulatedRuntime, picks: int) -> str:
    return (f"target {target.arch}:{target.cpu} does not run on this host: candidates are ranked by the cost model "
            f"(nothing is timed), and each task's best pick (up to {picks} tried) is verified under "
            f"{runtime.emulator.rsplit('/', 1)[-1]} against IREE's default build for this host (correctness only); "
            "measure on the real machine with a batch (ansor-measure export) for timings")


def tune_by_model(
    text: str, what: str, target: Target, options: TuneOptions, runtime: EmulatedRuntime,
    callbacks: Sequence[TuningCallback] = (),
) -> list[VerifiedChoice]:
    """Per task, the cost model's best picks built for `target`, verified under qemu until one passes; logged."""
    picks = max(1, options.trials if options.trials is not None else DEFAULT_PICKS)
    for callback in callbacks:
        callback.on_note(emulation_note(target, runtime, picks))
    tasks = [t for t in extract_tasks(text, target, what) if t.tunable]
    if not tasks:
        raise AnsorError(f"{what}: nothing to tune")
    policy = make_search_policy(options, target, random.Random(options.seed))
    if not policy.can_predict():
        raise AnsorError(f"target {target.key}: ranking without timing needs a cost model: use policy=evolutionary "
                         "with the shipped model or a model file")
    host = parse_resolved_target("llvm-cpu")
    history = read_records(options.log) if options.log.exists() else []
    log = TuningLog(options.log)
    builder = LocalBuilder(target, workers=options.build_workers, timeout_s=options.compile_timeout_s)
    host_builder = LocalBuilder(host, workers=1, timeout_s=options.compile_timeout_s)
    host_runner = LocalRunner(host, timeout_s=options.run_timeout_s, min_time_s=0.01, min_repeats=1)
    emulated = QemuRunner(runtime)
    choices = []
    try:
        for task in tasks:
            check_inputs(task.input_types, f"task {task.name}")
            choice = _choose(task, target, options, picks, policy, history, builder,
                             host_references(task, host, host_builder, host_runner, options.seed), emulated)
            log.append([*choice.tried[:-1], choice.default, choice.tried[-1]] if not choice.is_default
                       else [*choice.tried, choice.default])
            choices.append(choice)
            for callback in callbacks:
                callback.on_note(describe(choice))
    finally:
        log.release()
        for closable in (builder, host_builder, host_runner, emulated):
            closable.close()
    return choices


def describe(choice: VerifiedChoice) -> str:
    failed = [r for r in choice.tried if r.result.error != ErrorKind.NOT_MEASURED]
    rejected = f"; rejected {len(failed)} ({', '.join(sorted({r.result.error.value for r in failed}))})" if failed \
        else ""
    picked = "IREE's default (no model pick passed)" if choice.is_default else \
        f"model pick {len(choice.tried)} (sketch {choice.chosen.candidate.sketch_index}, {choice.chosen.family.value})"
    return (f"task {choice.task.name}: {picked}, verified under qemu, max abs error "
            f"{choice.chosen.result.max_abs_error:.2e}{rejected}")


def host_references(task: Task, host: Target, builder: LocalBuilder, runner: LocalRunner,
                seed: int) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """(inputs, IREE's default outputs built for this host): what every emulated run must reproduce."""
    inputs = tuple(encode_array(a) for a in make_inputs(task, seed))
    flow = compile_to_phase(task_module(task), host.compile_flags(), "flow", task.name)
    (build,) = builder.build([BuildInput(task.key, flow, task.root_index, None)])
    if not build.ok or build.program is None:
        raise AnsorError(f"task {task.name}: IREE's build for this host failed ({build.message}): no reference")
    run = runner.submit(RunInput(build.program, inputs, return_outputs=True)).result()
    if not run.measured.ok:
        raise AnsorError(f"task {task.name}: IREE's build for this host failed to run ({run.measured.message})")
    return inputs, run.outputs


def _choose(task: Task, target: Target, options: TuneOptions, picks: int, policy, history: list[Record],
            builder: LocalBuilder, data: tuple[tuple[bytes, ...], tuple[bytes, ...]],
            emulated: QemuRunner) -> VerifiedChoice:
    inputs, references = data
    flow = compile_to_phase(task_module(task), target.compile_flags(), "flow", task.name)
    sketches = generate_sketches(task, target)
    by_index = {s.index: s for s in sketches}
    known = task_history(history, target.key, task.key, sketches, target.fingerprint)
    policy.update(task, sketches, [(r.candidate, r.result) for r in known if r.candidate.sketch_index >= 0])

    def verify(candidate: Candidate, sketch: Sketch, build_item: BuildInput, why: str) -> Record:
        (build,) = builder.build([build_item])
        if not build.ok or build.program is None:
            result = MeasureResult(build.error, compile_s=build.compile_s, message=build.message)
        else:
            result = _run(emulated, build.program, inputs, references, why, build.compile_s)
        return make_record(target, task, candidate, sketch, result, options.rewrites)

    default = verify(Candidate(task.key, 0, ()), sketches[0], BuildInput(task.key, flow, task.root_index, None),
                     "IREE's default")
    tried: list[Record] = []
    for rank, candidate in enumerate(policy.predict_best(task, sketches, count=picks), start=1):
        sketch = by_index[candidate.sketch_index]
        record = verify(candidate, sketch, build_input(task, sketch, candidate, flow),
                        f"ranked {rank} by the cost model")
        tried.append(record)
        if record.result.error == ErrorKind.NOT_MEASURED:
            return VerifiedChoice(task, record, tuple(tried), default)
    if default.result.error != ErrorKind.NOT_MEASURED:
        raise AnsorError(f"task {task.name}: IREE's default build for {target.key} fails under qemu "
                         f"({default.result.error.value}: {default.result.message})")
    return VerifiedChoice(task, default, tuple(tried), default)


def _run(runner: QemuRunner, program: BuiltProgram, inputs: tuple[bytes, ...], references: tuple[bytes, ...],
         why: str, compile_s: float) -> MeasureResult:
    result = runner.submit(RunInput(program, inputs, references)).result().measured
    message = f"{why}; {result.message}" if result.error == ErrorKind.NOT_MEASURED else result.message
    return replace(result, compile_s=compile_s, message=message)


def make_record(target: Target, task: Task, candidate: Candidate, sketch: Sketch, result: MeasureResult,
                rewrites: tuple[str, ...] = ()) -> Record:
    return Record(target=target.key, task_key=task.key, task_name=task.name, candidate=candidate, sketch=sketch,
                  config=render_config(sketch, candidate, task), root_index=task.root_index, result=result,
                  timestamp=now(), versions=producer_versions(), fingerprint=target.fingerprint, rewrites=rewrites)

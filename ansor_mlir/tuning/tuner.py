"""The tuning loop: tasks -> sketches -> candidates -> builds -> measurements -> records.

Every task is measured alone, as a standalone module IREE compiles to exactly
one dispatch. IREE's default build of the task is measured first: it is the
reference every candidate's output must match and the time to beat. Then,
batch by batch, the task scheduler picks a task, its search policy proposes
candidates, the builder compiles them in parallel, the runner checks and
times them one at a time, and each record is appended to the log the moment
its measurement completes. Several tuners may share a log: before each batch
the loop reads what the others appended and measured (`Database.refresh`),
and it claims its batch first, so no candidate is measured twice. The loop
draws nothing: callbacks (`tuning.callbacks`) show progress.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, as_completed
from dataclasses import dataclass, field, replace

from ansor_mlir.codegen.transform_strategy import render_strategy, strategy_name
from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.schedule import Candidate, Family, Sketch
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.database.database import Database
from ansor_mlir.database.records import Claim, Record, claim_target, is_time, now, producer_versions, task_history
from ansor_mlir.database.registry import make_database
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.dispatch_regions import as_one_dispatch
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.builder import Builder, BuildInput, BuildResult, BuiltProgram, ProgramBuildInput
from ansor_mlir.measure.dask_engine import cluster_measurers
from ansor_mlir.measure.inputs import check_inputs, encode_array, make_inputs
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.measure.local_runner import LocalRunner
from ansor_mlir.measure.runner import CompareInput, RunInput, Runner, RunResult
from ansor_mlir.mlir.context import as_module
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.space.resolve import render_config
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning import anchor
from ansor_mlir.tuning.anchor import Anchor
from ansor_mlir.tuning.budget import Budget
from ansor_mlir.tuning.budget_outlook import outlook, scaled_trials
from ansor_mlir.tuning.callbacks import TuningCallback
from ansor_mlir.tuning.options import TuneOptions, make_search_policy
from ansor_mlir.tuning.task_result import TaskResult
from ansor_mlir.tuning.task_scheduler import TaskScheduler, make_scheduler
from ansor_mlir.tuning.thread_seeds import thread_seeds
from ansor_mlir.tuning.verification import (
    ProgramVerifier,
    UserProgram,
    build_gap,
    summarize,
    whole_program_note,
)

REFERENCE_TIMEOUT_S = 600.0


class TuningInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a run: what was measured is in the log; the message says how to resume.

    `exit_code` is the shell's for the signal (130 for SIGINT), carried over from the interrupt raised.
    """

    def __init__(self, message: str, exit_code: int = 130):
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class TaskSession:
    """Everything needed to measure candidates of one task in this run."""

    task: Task
    sketches: list[Sketch]
    flow_text: str
    # The arguments and IREE's default's outputs, `.npy` encoded: what every run input carries.
    inputs: tuple[bytes, ...]
    references: tuple[bytes, ...]
    measured: set[str]
    result: TaskResult
    # The program each batch is timed alternately with (`tuning.anchor`); None: times as measured alone.
    anchor: Anchor | None = None
    # Candidates measured first: the task's best at other thread counts on this machine (`tuning.thread_seeds`).
    seeds: list[Candidate] = field(default_factory=list)


def task_module(task: Task) -> str:
    """The task as a module to build: one dispatch, as in the program (`as_one_dispatch`)."""
    what = f"task {task.name}"
    return as_module(as_one_dispatch(task.func_text, what), what)


def build_input(task: Task, sketch: Sketch, candidate: Candidate, flow_text: str) -> BuildInput:
    """What to compile for a candidate: a configuration for the root, or a whole strategy."""
    if sketch.family is Family.TRANSFORM:
        strategy = (strategy_name(task, candidate), render_strategy(sketch, candidate, task,
                                                                    strategy_name(task, candidate)))
        return BuildInput(task.key, flow_text, task.root_index, None, strategy)
    if sketch.is_default and sketch.fixed_config is None:  # IREE's own choice: nothing to attach
        return BuildInput(task.key, flow_text, task.root_index, None)
    return BuildInput(task.key, flow_text, task.root_index, render_config(sketch, candidate, task))


def tunable_tasks(text: str, what: str, target: Target, callbacks: Sequence[TuningCallback]) -> list[Task]:
    """The program's tasks that can be tuned; the callbacks hear each task's notes."""
    tasks = extract_tasks(text, target, what)
    tunable = [t for t in tasks if t.tunable]
    if not tunable:
        notes = "; ".join(n for t in tasks for n in t.notes) or "no linalg compute dispatch"
        raise AnsorError(f"{what}: nothing to tune ({notes})")
    for task in tasks:
        for note in task.notes:
            for callback in callbacks:
                callback.on_note(f"task {task.name}: {note}")
    return tunable


class Tuner:
    """Runs the search for every task of a module and keeps the log.

    The builder and runner are the instances given (here or in `options`) or
    the ones `options` names: this host's `LocalBuilder` and `LocalRunner`, a
    cluster's with `options.cluster`. Records go to `database` (default: the
    JSONL log `options.log`); the task scheduler is the one
    `options.task_scheduler` names.
    Callbacks hear of every note, measurement, round and finished task.
    """

    def __init__(
        self,
        target: Target,
        options: TuneOptions,
        callbacks: Sequence[TuningCallback] = (),
        scheduler: TaskScheduler | None = None,
        builder: Builder | None = None,
        runner: Runner | None = None,
        database: Database | None = None,
    ):
        self.target = target
        self.options = options
        self.callbacks = list(callbacks)
        self.scheduler = scheduler or make_scheduler(options.task_scheduler, options.batch_size, options.seed,
                                                     options.early_stopping)
        self.rng = random.Random(options.seed)
        self.policy = make_search_policy(options, target, self.rng)
        # Seconds spent choosing candidates (featurizing, training, evolving), for overhead reports.
        self.search_s = 0.0
        builder = builder or (options.builder if isinstance(options.builder, Builder) else None)
        runner = runner or (options.runner if isinstance(options.runner, Runner) else None)
        if options.cluster is not None and builder is None and runner is None:
            builder, runner = cluster_measurers(options.cluster, target, options.compile_timeout_s,
                                                options.run_timeout_s, options.min_time_s)
        self.builder = builder or LocalBuilder(target, workers=options.build_workers,
                                               timeout_s=options.compile_timeout_s)
        self.runner = runner or LocalRunner(target, timeout_s=options.run_timeout_s, min_time_s=options.min_time_s)
        self.log = database or make_database(options.log)
        self.claim_target = claim_target(target.key, target.fingerprint)
        # Every record read from the log so far (this run's appends are not read back).
        self.seen: list[Record] = []

    def tune_module(self, text: str, what: str, parameters: bytes = b"", parameter_scope: str = "model",
                    ) -> list[TaskResult]:
        """Tune every task of the program; a model's `parameters` (its weights) serve its whole-program checks."""
        program = UserProgram(text, what, parameters, parameter_scope)
        return self.tune_tasks(self.tunable_tasks(text, what), program=program)

    def tunable_tasks(self, text: str, what: str) -> list[Task]:
        return tunable_tasks(text, what, self.target, self.callbacks)

    def predict_tasks(self, tasks: list[Task]) -> list[Record]:
        """Zero-trial mode: per task, the cost model's best pick that compiles; nothing is run or timed.

        The picks are appended to the log as `not_measured` records; any later
        measurement of the task takes precedence over them.
        """
        if not self.policy.can_predict():
            raise AnsorError(
                "zero-trial mode (trials=0) needs a trained cost model: none is shipped in this install; "
                "train one with tools/train_cost_model.py or pass a model file"
            )
        try:
            picks = [self._predict_task(task) for task in tasks]
        finally:
            self.builder.close()
        self.log.commit(picks)
        return picks

    def _predict_task(self, task: Task) -> Record:
        flow_text = compile_to_phase(task_module(task), self.target.compile_flags(), "flow", task.name)
        sketches = generate_sketches(task, self.target)
        by_index = {s.index: s for s in sketches}
        ranked = self.policy.predict_best(task, sketches, count=8)
        session = TaskSession(task, sketches, flow_text, (), (), set(), TaskResult(task=task))
        for candidate in ranked:
            sketch = by_index[candidate.sketch_index]
            (build,) = self.builder.build([build_input(task, sketch, candidate, flow_text)])
            if build.ok:
                result = MeasureResult(ErrorKind.NOT_MEASURED, compile_s=build.compile_s,
                                       message="chosen by the cost model alone")
                return self._record(session, candidate, sketch, result)
        fallback = Candidate(task.key, 0, ())
        result = MeasureResult(ErrorKind.NOT_MEASURED, message="no model pick compiled; IREE's default")
        return self._record(session, fallback, by_index[0], result)

    def tune_tasks(self, tasks: list[Task], program: UserProgram | None = None) -> list[TaskResult]:
        """Search every task; with the user's `program`, then check the best candidates in it."""
        trials = scaled_trials(self.options.trials, self.options.time_budget, len(tasks))
        budget = Budget.for_run(len(tasks), trials, self.options.trials_per_task,
                                self.options.verify if program is not None else 0, self.options.time_budget)
        for task in tasks:  # sized and typed before anything is measured
            check_inputs(task.input_types, f"task {task.name}")
        for note in self.runner.notes():
            for callback in self.callbacks:
                callback.on_note(note)
        try:
            sessions = [self._open_session(task) for task in tasks]
            results = [s.result for s in sessions]
            for callback in self.callbacks:
                callback.on_start(results, budget.remaining([r.trials for r in results]))
            try:
                self._search(sessions, budget)
                self._outlook(results)
                if budget.verify and program is not None:
                    self._verify(program, results, budget.verify)
            finally:
                for callback in self.callbacks:
                    callback.on_end(results)
        except KeyboardInterrupt as exc:
            count = self.log.appended
            raise TuningInterrupted(
                f"interrupted: this run's {count} measurement{'' if count == 1 else 's'} (each written when it "
                f"finished) are in {self.log.location}; rerun the same command with the same log to resume",
                getattr(exc, "exit_code", 130)) from None
        finally:
            self.log.release()
            self.builder.close()
            self.runner.close()
        return results

    def _outlook(self, results: list[TaskResult]) -> None:
        """Where the search left the estimated end-to-end latency, and what twice the budget is forecast to add."""
        view = outlook(results, self.options.batch_size)
        if view is not None:
            for callback in self.callbacks:
                callback.on_note(view.note())

    def _verify(self, program: UserProgram, results: list[TaskResult], count: int) -> None:
        """Whole-program verification of each task's best candidates; the verdicts go to the log."""
        for callback in self.callbacks:
            callback.on_note(f"checking up to {count} candidates per task in the whole program")
        verifier = ProgramVerifier(self.target, self.builder, self.runner, count, self.options.verify_rounds,
                                   self.options.seed, program.parameters, program.parameter_scope)
        records = self.log.records()
        verification = verifier.verify(program.text, program.name, results, records)
        self.log.commit(verification.checks)
        judged = records + verification.checks
        summarize(results, judged, self.target)
        notes = [note for note in (build_gap(r, judged, self.target) for r in results) if note]
        if verification.whole is not None:
            notes.append(whole_program_note(verification.whole))
        for note in notes:
            for callback in self.callbacks:
                callback.on_note(note)

    def _refresh(self) -> tuple[list[Record], list[Claim]]:
        """What other tuners appended since the last look, and what they are measuring now."""
        fresh, claims = self.log.refresh()
        self.seen += fresh
        return fresh, claims

    def _learn(self, session: TaskSession, records: list[Record]) -> list[Record]:
        """Count a task's records from the log (a resumed run's, another tuner's) once each; returns them."""
        task = session.task
        new = [r for r in task_history(records, self.target.key, task.key, session.sketches, self.target.fingerprint)
               if r.candidate.identity not in session.measured]
        for record in new:
            session.measured.add(record.candidate.identity)
            session.result.account(record)
        self.policy.update(task, session.sketches,
                           [(r.candidate, r.result) for r in new if r.candidate.sketch_index >= 0])
        return new

    def _open_session(self, task: Task) -> TaskSession:
        flow_text = compile_to_phase(task_module(task), self.target.compile_flags(), "flow", task.name)
        sketches = generate_sketches(task, self.target)
        inputs = tuple(encode_array(a) for a in make_inputs(task, self.options.seed))
        session = TaskSession(task, sketches, flow_text, inputs, (), set(), TaskResult(task=task))
        self._refresh()
        self._learn(session, self.seen)
        default = self._measure_reference(session)
        self._learn(session, self._refresh()[0])  # another tuner on the log may have recorded it meanwhile
        if default.candidate.identity not in session.measured and self.log.commit([default], unique=True):
            session.result.account(default)
            session.measured.add(default.candidate.identity)
        session.seeds = [c for c in thread_seeds(self.seen, self.target, task, sketches, self.options.batch_size)
                         if c.identity not in session.measured]
        if session.seeds:
            for callback in self.callbacks:
                callback.on_note(f"task {task.name}: measuring first the {len(session.seeds)} best candidates the "
                                 "log holds for it at another thread count on this CPU (`tuning.thread_seeds`)")
        return session

    def _measure_reference(self, session: TaskSession) -> Record:
        """Build and run IREE's default: its outputs are the right answers for this run."""
        task = session.task
        sketch = session.sketches[0]
        candidate = Candidate(task.key, 0, ())
        (build,) = self.builder.build([BuildInput(task.key, session.flow_text, task.root_index, None)])
        fused: MeasureResult | None = None
        if (not build.ok or build.program is None) and task.pads_input:
            fused = MeasureResult(build.error, compile_s=build.compile_s, message=build.message)
            build = self._split_reference(task, build)
        if not build.ok or build.program is None:
            raise _no_reference(task, build.error, build.message)
        # The reference may be slow (a large convolution untuned can take seconds per call): give it ample
        # time; candidates then get a limit the runner scales to it (`RunInput.expected_s`).
        run = self.runner.submit(RunInput(build.program, session.inputs, return_outputs=True,
                                          timeout_s=max(REFERENCE_TIMEOUT_S, self.options.run_timeout_s))).result()
        if not run.measured.ok:
            raise _no_reference(task, run.measured.error, run.measured.message)
        session.references = run.outputs
        session.result.default_s = run.measured.median_s
        if self.runner.times_one_device and anchor.usable(run.measured.median_s):
            session.anchor = Anchor(build.program, run.measured.median_s)
        if fused is not None:  # IREE's default of the fused dispatch is recorded as what it was: a failure
            return self._record(session, candidate, sketch, fused)
        return self._record(session, candidate, sketch, replace(run.measured, compile_s=build.compile_s))

    def _split_reference(self, task: Task, fused: BuildResult) -> BuildResult:
        """IREE's default of a task that pads its own input (`frontend.pad_fusion`), built as IREE forms it: the
        pad in a dispatch of its own. IREE's default of the fused dispatch can fail where tuned strategies do
        not (a 7x7 C3D's padded input over the 32 KB stack limit); the split program computes the same outputs,
        and its time is the one a candidate must beat."""
        for callback in self.callbacks:
            callback.on_note(f"task {task.name}: IREE's default of the dispatch with its pad failed "
                             f"({fused.error.value}); the reference is IREE's default with the pad split off")
        source = as_module(task.func_text, f"task {task.name}")
        (build,) = self.builder.build([ProgramBuildInput(source, "task")])
        return build

    def _record(
        self, session: TaskSession, candidate: Candidate, sketch: Sketch, result: MeasureResult
    ) -> Record:
        if result.error == ErrorKind.NONE and not is_time(result.median_s):
            result = MeasureResult(ErrorKind.RUNTIME_ERROR, compile_s=result.compile_s,
                                   message=f"the runner reported an unusable time ({result.median_s!r} s)")
        return Record(
            target=self.target.key,
            task_key=session.task.key,
            task_name=session.task.name,
            candidate=candidate,
            sketch=sketch,
            config=render_config(sketch, candidate, session.task),
            root_index=session.task.root_index,
            result=result,
            timestamp=now(),
            versions=producer_versions(),
            fingerprint=self.target.fingerprint,
            rewrites=self.options.rewrites,
        )

    def _search(self, sessions: list[TaskSession], budget: Budget) -> None:
        """Batches until the scheduler stops, within the budget (records in the log count toward it).

        Before each batch the log is re-read: other tuners' records count
        toward a task's budget and teach its policy, and what they are
        measuring now (their claims) is neither proposed nor counted twice.
        """
        results = [s.result for s in sessions]
        exhausted: set[int] = set()  # tasks whose policy has nothing new to propose
        done: set[int] = set()
        while True:
            if budget.expired():
                self._note_time_spent(results, budget)
                for result in (r for i, r in enumerate(results) if i not in done):
                    for callback in self.callbacks:
                        callback.on_task_done(result)
                return
            fresh, claims = self._refresh()
            for index, session in enumerate(sessions):
                learned = self._learn(session, fresh)
                if learned:
                    for callback in self.callbacks:
                        callback.on_measured(results, index, learned)
            claimed = {s.task.key: {c.identity for c in claims
                                    if c.target == self.claim_target and c.task_key == s.task.key}
                       for s in sessions}
            for index in (i for i, r in enumerate(results) if r.stuck and i not in exhausted):
                exhausted.add(index)
                self._note_stuck(results[index])
            used = [s.result.trials + len(claimed[s.task.key]) for s in sessions]
            left = [0 if i in exhausted else n for i, n in enumerate(budget.left(used))]
            for index in (i for i, n in enumerate(left) if n == 0 and i not in done):
                done.add(index)
                for callback in self.callbacks:
                    callback.on_task_done(results[index])
            index = self.scheduler.next_task(results, left)
            if index is None:
                for result in (r for i, r in enumerate(results) if i not in done):
                    for callback in self.callbacks:
                        callback.on_task_done(result)
                return
            if left[index] <= 0:
                raise ValueError(f"task scheduler picked task {index}, which has no trials left")
            session = sessions[index]
            started = time.perf_counter()
            batch = self._next_batch(session, session.measured | claimed[session.task.key],
                                     min(self.options.batch_size, left[index]))
            self.search_s += time.perf_counter() - started
            if not batch:
                exhausted.add(index)
                continue
            granted = self.log.claim(self.claim_target, batch, budget.per_task)
            batch = [c for c in batch if c.identity in granted]
            if batch:
                self._measure_batch(session, batch, lambda records, i=index: self._measured(results, i, records))
                left_in_run = budget.remaining([s.result.trials for s in sessions])
                for callback in self.callbacks:
                    callback.on_round(results, index, left_in_run)

    def _next_batch(self, session: TaskSession, seen: set[str], size: int) -> list[Candidate]:
        """The task's seeds not yet measured or claimed, else the search policy's next batch."""
        fresh = [c for c in session.seeds if c.identity not in seen]
        seeds, session.seeds = fresh[:size], fresh[size:]
        if seeds:
            return seeds
        return self.policy.next_batch(session.task, session.sketches, seen, size)

    def _note_time_spent(self, results: list[TaskResult], budget: Budget) -> None:
        left = budget.remaining([r.trials for r in results])
        for callback in self.callbacks:
            callback.on_note(f"time budget of {self.options.time_budget:.4g} s spent: the search stops with {left} "
                             "of its trials left")

    def _note_stuck(self, result: TaskResult) -> None:
        """Say why a task stops early: every candidate failed the same way, which no more trials will fix."""
        for callback in self.callbacks:
            callback.on_note(
                f"task {result.task.name}: stopped after {result.trials} trials: every candidate failed, the last "
                f"{result.streak} the same way ({result.streak_error}); it keeps IREE's default. This is a bug of "
                f"ansor-mlir's sketches for this task: please report it with the log ({self.log.location})")

    def _measured(self, results: list[TaskResult], index: int, records: list[Record]) -> None:
        for callback in self.callbacks:
            callback.on_measured(results, index, records)

    def _measure_batch(self, session: TaskSession, batch: list[Candidate],
                       on_record: Callable[[list[Record]], None] = lambda records: None) -> list[Record]:
        """Build the batch in parallel, run it (runs never overlap builds), then time its correct programs
        alternately with the task's anchor (`tuning.anchor`); the records are appended to the log as the batch
        completes (on an interrupt, the measurements finished by then, as timed alone), then the policy learns."""
        task = session.task
        sketches = {s.index: s for s in session.sketches}
        builds = self.builder.build([build_input(task, sketches[c.sketch_index], c, session.flow_text) for c in batch])
        logged: dict[int, Record] = {}

        def log(position: int, result: MeasureResult) -> None:
            candidate = batch[position]
            record = self._record(session, candidate, sketches[candidate.sketch_index], result)
            self.log.commit([record])
            logged[position] = record
            session.measured.add(candidate.identity)
            session.result.account(record)
            on_record([record])

        futures: dict[Future[RunResult], int] = {}
        for position, build in enumerate(builds):
            if build.ok and build.program is not None:
                run = RunInput(build.program, session.inputs, session.references, expected_s=session.result.default_s)
                futures[self.runner.submit(run)] = position
            else:
                log(position, MeasureResult(error=build.error, compile_s=build.compile_s, message=build.message))
        measured: dict[int, MeasureResult] = {}
        try:
            for future in as_completed(futures):
                measured[futures[future]] = future.result().measured
            times = self._anchored_times(session, builds, measured)
        except KeyboardInterrupt:  # measurements that finished as the interrupt came are kept, not lost
            for future, position in futures.items():
                if position not in measured and future.done() and not future.cancelled() and not future.exception():
                    measured[position] = future.result().measured
            for position, result in sorted(measured.items()):
                log(position, replace(result, compile_s=builds[position].compile_s))
            raise
        for position, result in sorted(measured.items()):
            anchored_s, reference_s = times.get(position, (None, None))
            log(position, replace(anchor.anchored(result, anchored_s, reference_s),
                                  compile_s=builds[position].compile_s))
        started = time.perf_counter()
        records = [logged[i] for i in range(len(batch))]
        self.policy.update(task, session.sketches, [(r.candidate, r.result) for r in records])
        self.search_s += time.perf_counter() - started
        return records

    def _anchored_times(self, session: TaskSession, builds: list[BuildResult], measured: dict[int, MeasureResult],
                        ) -> dict[int, tuple[float, float]]:
        """Per correct program of the batch, (its anchored time, the anchor's time in the same rounds): the
        batch and the task's anchor timed alternately (`tuning.anchor`); none when there is no anchor or the
        alternated timing failed. A program far faster than the anchor becomes the next batches' anchor."""
        positions = [p for p, r in sorted(measured.items()) if r.ok and anchor.usable(r.median_s)]
        if session.anchor is None and positions and self.runner.times_one_device:
            # IREE's default was too slow to anchor: the fastest program, as measured alone, anchors the next.
            session.anchor = anchor.rebased(None, _timed_programs(builds, {p: measured[p].median_s for p in positions}))
            return {}
        if session.anchor is None or not positions:
            return {}
        programs = (session.anchor.program, *(builds[p].program for p in positions))
        compared = self.runner.submit_compare(CompareInput(programs, session.inputs,
                                                           *anchor.rounds_for(session.anchor.time_s))).result()
        if not compared.ok:
            return {}
        now, times = anchor.anchored_times(session.anchor.time_s, compared.samples)
        anchored_s = {p: (t, now) for i, (p, t) in enumerate(zip(positions, times, strict=True), start=1)
                      if i not in compared.wrong}
        # A program far faster than the anchor anchors the next batches (`anchor.rebased`).
        session.anchor = anchor.rebased(session.anchor,
                                        _timed_programs(builds, {p: t for p, (t, _) in anchored_s.items()}))
        return anchored_s


def _timed_programs(builds: list[BuildResult], times: dict[int, float]) -> list[tuple[BuiltProgram, float]]:
    """(program, time) of each batch position timed in `times`, what `anchor.rebased` chooses among."""
    return [(program, t) for p, t in times.items() if (program := builds[p].program) is not None]


def _no_reference(task: Task, error: ErrorKind, message: str) -> AnsorError:
    return AnsorError(
        f"task {task.name}: IREE's untuned build failed ({error.value}: {message}); cannot tune without a reference"
    )

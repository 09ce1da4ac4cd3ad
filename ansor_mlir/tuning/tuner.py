"""The tuning loop: tasks -> sketches -> candidates -> builds -> measurements -> records.

Every task is measured alone, as a standalone module IREE compiles to exactly
one dispatch. IREE's default build of the task is measured first: it is the
reference every candidate's output must match and the time to beat. Batches
are built in parallel, then timed one at a time, then appended to the log.
"""

from __future__ import annotations

import hashlib
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ansor_mlir.codegen.transform_strategy import render_strategy, strategy_name
from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.schedule import Candidate, Family, Sketch
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.database.records import Record, append_records, now, producer_versions, read_records, task_history
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.builder import Builder, BuildInput
from ansor_mlir.measure.runner import Runner
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.search.evolutionary_search import EvolutionarySearch
from ansor_mlir.search.search_policy import make_policy
from ansor_mlir.space.resolve import render_config
from ansor_mlir.space.sketch_rules import generate_sketches

REFERENCE_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class TuneOptions:
    trials: int = 32
    log: Path = Path("ansor_tuning.jsonl")
    seed: int = 0
    batch_size: int = 8
    policy: str = "evolutionary"
    # Warm-start model for the evolutionary policy (default: the one shipped in the package).
    cost_model: Path | None = None
    # Start from the model shipped in the package (False: learn from this run's measurements only).
    pretrained: bool = True
    build_workers: int = 2
    compile_timeout_s: float = 60.0
    run_timeout_s: float = 30.0
    min_time_s: float = 0.1
    progress: bool = True


@dataclass
class TaskResult:
    """How tuning went for one task."""

    task: Task
    default_s: float | None = None
    best_s: float | None = None
    best_record: Record | None = None
    trials: int = 0
    failures: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    @property
    def speedup(self) -> float | None:
        if self.default_s and self.best_s:
            return self.default_s / self.best_s
        return None


@dataclass
class TaskSession:
    """Everything needed to measure candidates of one task in this run."""

    task: Task
    sketches: list[Sketch]
    flow_text: str
    inputs: list[str]
    references: list[str]
    measured: set[str]
    result: TaskResult


def task_module(task: Task) -> str:
    return f"module {{\n{task.func_text}}}\n"


def make_inputs(task: Task, workdir: Path, seed: int) -> list[str]:
    """Fixed-seed random inputs for a task (same task and seed, same data)."""
    digest = hashlib.sha256(f"{task.key}:{seed}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    paths = []
    for i, ttype in enumerate(task.input_types):
        inner = ttype[len("tensor<"):-1].split("x")
        shape, elem = [int(d) for d in inner[:-1]], inner[-1]
        if elem.startswith("f") or elem == "bf16":
            dtype = {"f16": np.float16, "f64": np.float64}.get(elem, np.float32)
            data = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
        else:
            dtype = {"i8": np.int8, "i16": np.int16, "i64": np.int64, "i1": np.bool_}.get(elem, np.int32)
            data = rng.integers(-4, 5, size=shape).astype(dtype)
        path = workdir / f"{task.key}_in{i}.npy"
        np.save(path, data)
        paths.append(str(path))
    return paths


def build_input(task: Task, sketch: Sketch, candidate: Candidate, flow_text: str, out: Path) -> BuildInput:
    """What to compile for a candidate: a configuration for the root, or a whole strategy."""
    if sketch.family is Family.TRANSFORM:
        strategy = (strategy_name(task, candidate), render_strategy(sketch, candidate, task,
                                                                    strategy_name(task, candidate)))
        return BuildInput(task.key, flow_text, task.root_index, None, out, strategy)
    return BuildInput(task.key, flow_text, task.root_index, render_config(sketch, candidate, task), out)


class Tuner:
    """Runs the search for every task of a module and keeps the log."""

    def __init__(self, target: Target, options: TuneOptions, console: Console | None = None):
        self.target = target
        self.options = options
        self.console = console or Console(stderr=True, width=None if sys.stderr.isatty() else 140)
        self.rng = random.Random(options.seed)
        self.policy = make_policy(options.policy, target, self.rng, options.cost_model, options.pretrained)
        # Seconds spent choosing candidates (featurizing, training, evolving), for overhead reports.
        self.search_s = 0.0
        self.builder = Builder(target, workers=options.build_workers, timeout_s=options.compile_timeout_s)
        self.runner = Runner(target, timeout_s=options.run_timeout_s, min_time_s=options.min_time_s)

    def tune_module(self, text: str, what: str) -> list[TaskResult]:
        return self.tune_tasks(self.tunable_tasks(text, what))

    def tunable_tasks(self, text: str, what: str) -> list[Task]:
        tasks = extract_tasks(text, self.target, what)
        tunable = [t for t in tasks if t.tunable]
        if not tunable:
            notes = "; ".join(n for t in tasks for n in t.notes) or "no linalg compute dispatch"
            raise AnsorError(f"{what}: nothing to tune ({notes})")
        for task in tasks:
            for note in task.notes:
                self.console.print(f"[yellow]note[/]: task {task.name}: {note}")
        return tunable

    def predict_tasks(self, tasks: list[Task]) -> list[Record]:
        """Zero-trial mode: per task, the cost model's best pick that compiles; nothing is run or timed.

        The picks are appended to the log as `not_measured` records; any later
        measurement of the task takes precedence over them.
        """
        if not isinstance(self.policy, EvolutionarySearch) or not self.policy.model.trained:
            raise AnsorError(
                "zero-trial mode (trials=0) needs a trained cost model: none is shipped in this install; "
                "train one with tools/train_cost_model.py or pass a model file"
            )
        picks = []
        with tempfile.TemporaryDirectory(prefix="ansor_") as tmp:
            for task in tasks:
                picks.append(self._predict_task(task, Path(tmp)))
        append_records(self.options.log, picks)
        return picks

    def _predict_task(self, task: Task, workdir: Path) -> Record:
        flow_text = compile_to_phase(task_module(task), self.target.compile_flags(), "flow", task.name)
        sketches = generate_sketches(task, self.target)
        by_index = {s.index: s for s in sketches}
        assert isinstance(self.policy, EvolutionarySearch)
        ranked = self.policy.predict_best(task, sketches, count=8)
        session = TaskSession(task, sketches, flow_text, [], [], set(), TaskResult(task=task))
        for candidate in ranked:
            sketch = by_index[candidate.sketch_index]
            build = self.builder.build([build_input(task, sketch, candidate, flow_text, workdir / "pick.vmfb")])[0]
            if build.error == ErrorKind.NONE:
                result = MeasureResult(ErrorKind.NOT_MEASURED, compile_s=build.compile_s,
                                       message="chosen by the cost model alone")
                return self._record(session, candidate, sketch, result)
        fallback = Candidate(task.key, 0, ())
        result = MeasureResult(ErrorKind.NOT_MEASURED, message="no model pick compiled; IREE's default")
        return self._record(session, fallback, by_index[0], result)

    def tune_tasks(self, tasks: list[Task]) -> list[TaskResult]:
        records = read_records(self.options.log)
        with tempfile.TemporaryDirectory(prefix="ansor_") as tmp:
            workdir = Path(tmp)
            try:
                sessions = [self._open_session(task, records, workdir) for task in tasks]
                self._search(sessions, workdir)
            finally:
                self.runner.close()
        return [s.result for s in sessions]

    def _open_session(self, task: Task, records: list[Record], workdir: Path) -> TaskSession:
        flow_text = compile_to_phase(task_module(task), self.target.compile_flags(), "flow", task.name)
        sketches = generate_sketches(task, self.target)
        inputs = make_inputs(task, workdir, self.options.seed)
        references = [str(workdir / f"{task.key}_ref{i}.npy") for i in range(len(task.output_types))]
        result = TaskResult(task=task)
        session = TaskSession(task, sketches, flow_text, inputs, references, set(), result)
        mine = task_history(records, self.target.key, task.key, sketches)
        for record in mine:
            session.measured.add(record.candidate.identity)
            self._account(session, record)
        self.policy.update(task, sketches, [(r.candidate, r.result) for r in mine if r.candidate.sketch_index >= 0])
        default = self._measure_reference(session, workdir)
        if not any(r.is_default for r in mine):
            self._account(session, default)
            append_records(self.options.log, [default])
            session.measured.add(default.candidate.identity)
        return session

    def _measure_reference(self, session: TaskSession, workdir: Path) -> Record:
        """Build and run IREE's default: it defines the right answer for this run."""
        task = session.task
        sketch = session.sketches[0]
        candidate = Candidate(task.key, 0, ())
        build = self.builder.build([
            BuildInput(task.key, session.flow_text, task.root_index, None, workdir / f"{task.key}_ref.vmfb")
        ])[0]
        # The reference may be slow (a 13-GFLOP conv untuned takes seconds per call): give it
        # ample time, and candidates a limit that scales with it.
        measured = self.runner.run(build, session.inputs, None, save_outputs=session.references,
                                   timeout_s=max(REFERENCE_TIMEOUT_S, self.options.run_timeout_s))
        if not measured.ok:
            raise AnsorError(
                f"task {task.name}: IREE's untuned build failed ({measured.error.value}: "
                f"{measured.message}); cannot tune without a reference"
            )
        session.result.default_s = measured.median_s
        return self._record(session, candidate, sketch, measured)

    def _candidate_timeout(self, session: TaskSession) -> float:
        """A candidate may take a few times as long as IREE's default before it is cut off."""
        calls = 1 + 2 + self.runner.min_repeats
        return max(self.options.run_timeout_s, 3.0 * calls * (session.result.default_s or 0.0))

    def _record(
        self, session: TaskSession, candidate: Candidate, sketch: Sketch, result: MeasureResult
    ) -> Record:
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
        )

    def _account(self, session: TaskSession, record: Record) -> None:
        result = session.result
        result.trials += 1
        if not record.ok:
            result.failures += 1
            kind = record.result.error.value
            result.errors[kind] = result.errors.get(kind, 0) + 1
            return
        if result.best_s is None or record.result.median_s < result.best_s:
            result.best_s = record.result.median_s
            result.best_record = record

    def _search(self, sessions: list[TaskSession], workdir: Path) -> None:
        budget = {s.task.key: max(0, self.options.trials - s.result.trials) for s in sessions}
        total = sum(budget.values())
        with Progress(
            TextColumn("[bold]tuning"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=self.console,
            disable=not self.options.progress,
        ) as progress:
            bar = progress.add_task(self._status(sessions), total=total)
            while any(budget.values()):
                progressed = False
                for session in sessions:
                    left = budget[session.task.key]
                    if left <= 0:
                        continue
                    size = min(self.options.batch_size, left)
                    started = time.perf_counter()
                    batch = self.policy.next_batch(session.task, session.sketches, session.measured, size)
                    self.search_s += time.perf_counter() - started
                    if not batch:
                        budget[session.task.key] = 0
                        continue
                    self._measure_batch(session, batch, workdir)
                    budget[session.task.key] = max(0, left - len(batch))
                    progress.update(bar, advance=len(batch), description=self._status(sessions))
                    progressed = True
                if not progressed:
                    break

    def _measure_batch(self, session: TaskSession, batch: list[Candidate], workdir: Path) -> None:
        task = session.task
        sketches = {s.index: s for s in session.sketches}
        builds = self.builder.build([
            build_input(task, sketches[c.sketch_index], c, session.flow_text,
                        workdir / f"{task.key}_{len(session.measured) + i}.vmfb")
            for i, c in enumerate(batch)
        ])
        records = []
        results = []
        for candidate, build in zip(batch, builds, strict=True):
            measured = self.runner.run(build, session.inputs, session.references,
                                       timeout_s=self._candidate_timeout(session))
            if build.vmfb_path:
                Path(build.vmfb_path).unlink(missing_ok=True)
            record = self._record(session, candidate, sketches[candidate.sketch_index], measured)
            records.append(record)
            results.append((candidate, measured))
            session.measured.add(candidate.identity)
            self._account(session, record)
        append_records(self.options.log, records)
        started = time.perf_counter()
        self.policy.update(task, session.sketches, results)
        self.search_s += time.perf_counter() - started

    @staticmethod
    def _status(sessions: list[TaskSession]) -> str:
        trials = sum(s.result.trials for s in sessions)
        failures = sum(s.result.failures for s in sessions)
        speedups = [s.result.speedup for s in sessions if s.result.speedup]
        best = " ".join(
            f"{s.task.name.split('_dispatch')[0]}={s.result.best_s * 1e3:.3f}ms"
            for s in sessions if s.result.best_s
        )
        geo = float(np.exp(np.mean(np.log(speedups)))) if speedups else 1.0
        return f"trials {trials} failed {failures} best {best} speedup {geo:.2f}x"


def results_table(results: list[TaskResult]) -> Table:
    table = Table(title="ansor-mlir tuning results")
    for column in ("task", "weight", "GFLOP", "trials", "failed", "IREE default", "tuned", "speedup", "best sketch"):
        table.add_column(column, justify="right" if column != "task" else "left")
    for r in results:
        best = r.best_record
        table.add_row(
            r.task.name,
            str(r.task.weight),
            f"{r.task.flops / 1e9:.3f}",
            str(r.trials),
            str(r.failures),
            f"{r.default_s * 1e3:.3f} ms" if r.default_s else "-",
            f"{r.best_s * 1e3:.3f} ms" if r.best_s else "-",
            f"{r.speedup:.2f}x" if r.speedup else "-",
            f"s{best.candidate.sketch_index} {'+'.join(best.rules)}" if best else "-",
        )
    return table


__all__ = ["ErrorKind", "TaskResult", "TuneOptions", "Tuner", "results_table"]

"""What runs inside a Dask task on a worker: one build or one measurement, by the local builder and runner.

The client side is `dask_engine`. A measurement here is exactly what this
host's `LocalRunner` does (the `run_worker` timing process, its checks and
its clock), so a cluster measures candidates the way a local run does. The
timing process outlives the task: a worker plugin, registered by the tuning
run under its own name, keeps one `LocalRunner` per runner settings and
worker thread, and closes them when the run unregisters it. A kernel that
crashes kills that process only, never the Dask worker. Without the plugin
(a worker that joined after registration missed it) a task times in a
one-off process.

Measuring needs IREE's runtime and numpy only (`local_runner` imports no
compiler); a build task unpickles a `LocalBuilder`, which imports IREE's
compiler bindings, so builds go to workers that have them.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from distributed import WorkerPlugin, get_worker

from ansor_mlir.measure.builder import BuildInput, BuildResult, ProgramBuildInput
from ansor_mlir.measure.local_runner import LocalRunner
from ansor_mlir.measure.runner import CompareInput, CompareResult, RunInput, RunResult

if TYPE_CHECKING:
    from ansor_mlir.measure.local_builder import LocalBuilder


class TimingProcesses(WorkerPlugin):
    """One tuning run's timing processes on one worker: a `LocalRunner` per runner settings and thread."""

    def setup(self, worker: object) -> None:  # on the worker (the plugin travels pickled, so no lock before)
        self.runners: dict[tuple[str, int], LocalRunner] = {}
        self.lock = threading.Lock()

    def runner(self, template: LocalRunner) -> LocalRunner:
        # Per thread: a worker declaring several devices runs as many timings at once, each in its own process.
        key = (repr(template), threading.get_ident())
        with self.lock:
            return self.runners.setdefault(key, template)

    def teardown(self, worker: object) -> None:
        with self.lock:
            runners, self.runners = list(self.runners.values()), {}
        for runner in runners:
            runner.close()


def measure(plugin: str, template: LocalRunner, item: RunInput) -> RunResult:
    """Check and time one program on this worker's device; the result names the worker."""
    worker = get_worker()
    timing = worker.plugins.get(plugin)
    if isinstance(timing, TimingProcesses):
        result = timing.runner(template).run_now(item)
    else:
        with template:
            result = template.run_now(item)
    return replace(result, measured=replace(result.measured, worker=worker.address))


def compare(plugin: str, template: LocalRunner, item: CompareInput) -> CompareResult:
    """Time programs alternately on this worker's device (whole-program verification)."""
    timing = get_worker().plugins.get(plugin)
    if isinstance(timing, TimingProcesses):
        return timing.runner(template).compare_now(item)
    with template:
        return template.compare_now(item)


def build(template: LocalBuilder, item: BuildInput | ProgramBuildInput) -> BuildResult:
    """Compile one candidate (or a whole program) here: `iree-compile` in a scratch directory, the program comes
    back as bytes."""
    return template.build_now(item)

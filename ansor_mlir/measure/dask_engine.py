"""Builds and measurements as Dask tasks on a `distributed` cluster named by its scheduler address.

`connect("tcp://host:8786")` checks the cluster and returns a `DaskCluster`;
its `builder()` and `runner()` are a `Builder` and a `Runner` like the local
ones, whose tasks run the local builder and runner on the workers
(`dask_worker`). `distributed` is an optional extra
(`pip install "ansor-mlir[distributed]"`), imported only here and only when a
cluster is named.

How work is placed:

- **Measuring workers declare a device** (`dask worker ADDR --resources
  device=1 --nthreads 1`) and every measurement asks for `device=1`, so a
  device times one program at a time.
- **Builds ask for no device, and a build never shares a measuring worker's
  cores with a timing because measuring workers run one thread**: a Dask
  worker runs as many tasks at once as it has threads, so with one thread a
  build waits until the timing ends (and a timing until the build ends). We
  chose this over a `build` resource alone, which cannot say "not while
  timing": a worker declaring both would run a build beside a timing.
  `connect` refuses a device worker with more threads than devices. Idle
  measuring workers still build, so a cluster of measuring hosts needs no
  other workers. Where some workers declare a `build` resource
  (`--resources build=1`: hosts with IREE's compiler), builds go to those
  only, and measuring hosts need only IREE's runtime and numpy. Run one
  measuring worker per device (per host for CPU timing), or timings on one
  host share its memory bandwidth.
- **No shared file system**: programs travel as `.vmfb` bytes with their
  inputs and reference outputs (`RunInput`), results come back as data.
- **A worker that dies mid-task**: Dask re-runs its tasks on another worker
  (up to `distributed.scheduler.allowed-failures` times; past that the
  candidate is recorded as a runtime error naming the deaths). A task has one
  result however often it ran, and the tuner records a measurement when that
  result arrives, so a re-queued measurement is in the log once, by the
  worker that finished it, and none is lost. Records name the worker and its
  device (`MeasureResult.worker`, `.device`).
- **Never a hang**: connecting has a timeout; while tasks are pending, a
  watchdog fails them with a one-line `AnsorError` when no worker able to run
  them (a device worker for measurements, any for builds) has been in the
  cluster for `worker_wait_s`, or when the scheduler is lost.
- **Progress**: the tuner's progress bar advances as each record lands;
  tasks are keyed `ansor-build-...` and `ansor-measure-...`, so the Dask
  dashboard's progress and task-stream panels show builds and measurements
  apart.

Programs are compiled for the target the tuning client resolved (`cpu=host`
is the client's CPU, baked into the flow-level module), so measuring hosts
must be able to run that CPU's code: name their CPU (`cpu=znver3`) when it
differs from the client's.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.target import Target
from ansor_mlir.errors import AnsorError
from ansor_mlir.measure.builder import Builder, BuildInput, BuildResult, ProgramBuildInput
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.measure.local_runner import LocalRunner
from ansor_mlir.measure.runner import CompareInput, CompareResult, RunInput, Runner, RunResult

DEVICE = "device"
BUILD = "build"
CONNECT_TIMEOUT_S = 10.0
# How long a cluster may lack a worker that can run pending tasks (a device worker for measurements) before
# they fail, and how long `connect` waits for a device worker to register.
WORKER_WAIT_S = 60.0
REGISTER_WAIT_S = 15.0
WATCH_INTERVAL_S = 1.0
SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
ADDRESS = re.compile(r"(?:(?P<scheme>[a-z]+)://)?(?P<host>\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})")
START_WORKER = "dask worker {address} --resources device=1 --nthreads 1"


def check_address(text: str) -> str:
    """A scheduler address as Dask spells it (`tcp://host:8786`; a bare `host:port` is tcp); else `ValueError`."""
    match = ADDRESS.fullmatch(text.strip())
    if not match or not 0 < int(match["port"]) < 65536:
        raise ValueError("expected a Dask scheduler address such as tcp://host:8786")
    scheme = match["scheme"] or "tcp"
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme '{scheme}://': expected one of {', '.join(s + '://' for s in SCHEMES)}")
    return f"{scheme}://{match['host']}:{match['port']}"


def _distributed() -> Any:
    try:
        import distributed
    except ImportError as exc:
        raise AnsorError(f"measuring on a Dask cluster needs the 'distributed' package ({exc}): "
                         'pip install "ansor-mlir[distributed]"') from None
    return distributed


def connect(address: str, connect_timeout_s: float = CONNECT_TIMEOUT_S, worker_wait_s: float = WORKER_WAIT_S,
            register_wait_s: float = REGISTER_WAIT_S) -> DaskCluster:
    """A checked connection: the scheduler answers and a measuring worker is there (waiting up to
    `register_wait_s` for one to register); anything else is a one-line `AnsorError` saying what to do."""
    distributed = _distributed()
    try:
        address = check_address(address)
    except ValueError as exc:
        raise AnsorError(f"cluster={address}: {exc}") from None
    try:
        client = distributed.Client(address, timeout=connect_timeout_s, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise AnsorError(f"cluster={address}: no Dask scheduler answered in {connect_timeout_s:.0f} s "
                         f"({_first_line(exc)}): start one with `dask scheduler` (it prints its address) and "
                         "check the host and port") from None
    cluster = DaskCluster(address, client, worker_wait_s)
    try:
        cluster.check_workers(register_wait_s)
    except BaseException:
        cluster.close()
        raise
    return cluster


@dataclass
class _Pending:
    """A Dask future and the `concurrent.futures.Future` the tuner waits on."""

    future: Any
    answer: Future
    device: bool


@dataclass
class DaskCluster:
    """A client of one scheduler, shared by a run's builder and runner, and the tasks they have pending."""

    address: str
    client: Any
    worker_wait_s: float = WORKER_WAIT_S
    build_resources: dict[str, float] = field(default_factory=dict)
    plugin: str = ""
    _pending: dict[str, _Pending] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _watcher: threading.Thread | None = field(default=None, repr=False)
    _closed: threading.Event = field(default_factory=threading.Event, repr=False)

    def builder(self, target: Target, timeout_s: float = 60.0) -> DaskBuilder:
        return DaskBuilder(self, LocalBuilder(target, workers=1, timeout_s=timeout_s))

    def runner(self, target: Target, timeout_s: float = 30.0, min_time_s: float = 0.1) -> DaskRunner:
        return DaskRunner(self, LocalRunner(target, timeout_s=timeout_s, min_time_s=min_time_s))

    # ---- the workers ------------------------------------------------------------------------------------------

    def workers(self) -> dict[str, dict]:
        return self.client.scheduler_info(n_workers=-1).get("workers", {})

    def check_workers(self, wait_s: float = REGISTER_WAIT_S) -> None:
        """Wait for a device worker; refuse one that could run a build beside a timing; pick build workers;
        register this run's timing-process plugin."""
        deadline = time.monotonic() + wait_s
        while True:
            workers = self.workers()
            devices = {a: w for a, w in workers.items() if w.get("resources", {}).get(DEVICE, 0) > 0}
            if devices or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        if not devices:
            others = f" ({len(workers)} worker{'' if len(workers) == 1 else 's'} without one)" if workers else ""
            raise AnsorError(f"cluster={self.address}: no worker declares a '{DEVICE}' resource after "
                             f"{wait_s:.0f} s{others}: start a measuring worker on each host with "
                             f"`{START_WORKER.format(address=self.address)}`")
        for address, info in devices.items():
            threads, count = info.get("nthreads", 1), info["resources"][DEVICE]
            if threads > count:
                raise AnsorError(f"cluster={self.address}: worker {address} declares {DEVICE}={count:g} but runs "
                                 f"{threads} threads, so a build could share its cores with a timing: restart it "
                                 f"with --nthreads {count:g}")
        if any(w.get("resources", {}).get(BUILD, 0) > 0 for w in workers.values()):
            self.build_resources = {BUILD: 1}
        self.plugin = f"ansor-mlir-timing-{uuid.uuid4().hex[:12]}"
        from ansor_mlir.measure.dask_worker import TimingProcesses

        self.client.register_plugin(TimingProcesses(), name=self.plugin)

    def describe(self) -> str:
        """One line for the console: where measurements and builds run, and the dashboard when there is one."""
        info = self.client.scheduler_info(n_workers=-1)
        workers = info.get("workers", {})
        devices = [a for a, w in workers.items() if w.get("resources", {}).get(DEVICE, 0) > 0]
        builders = [a for a, w in workers.items() if not self.build_resources
                    or w.get("resources", {}).get(BUILD, 0) > 0]
        text = (f"measuring on the Dask cluster at {self.address}: {len(devices)} device worker"
                f"{'' if len(devices) == 1 else 's'}, builds on {len(builders)} worker"
                f"{'' if len(builders) == 1 else 's'}")
        if "dashboard" not in info.get("services", {}):
            return text
        return f"{text}; dashboard {self.client.dashboard_link}"

    # ---- tasks ------------------------------------------------------------------------------------------------

    def submit(self, kind: str, function: Callable, *args: object, device: bool,
               convert: Callable[[Any], object], failed: Callable[[str], object]) -> Future:
        """Run `function(*args)` as a Dask task keyed `ansor-KIND-...`; the returned future holds
        `convert(result)`, `failed(message)` when the workers running it kept dying, or an `AnsorError` when
        the cluster cannot run it."""
        self._reopen()
        answer: Future = Future()
        answer.set_running_or_notify_cancel()
        resources = {DEVICE: 1} if device else self.build_resources
        if device:  # a measurement finds this run's timing processes on its worker by the plugin's name
            args = (self.plugin, *args)
        future = self.client.submit(function, *args, key=f"ansor-{kind}-{uuid.uuid4().hex}", pure=False,
                                    resources=resources or None)
        with self._lock:
            self._pending[future.key] = _Pending(future, answer, device)
        future.add_done_callback(lambda f: self._settle(f, convert, failed))
        self._watch()
        return answer

    def _reopen(self) -> None:
        """Connect again after `close` (a builder or runner stays usable after closing)."""
        if self.client.status in ("running", "connecting"):
            return
        reopened = connect(self.address, worker_wait_s=self.worker_wait_s)
        self.client, self.build_resources, self.plugin = reopened.client, reopened.build_resources, reopened.plugin

    def _settle(self, future: Any, convert: Callable[[Any], object], failed: Callable[[str], object]) -> None:
        with self._lock:
            pending = self._pending.pop(future.key, None)
        if pending is None:  # failed or cancelled already
            return
        distributed = _distributed()
        try:
            if future.status == "finished":
                pending.answer.set_result(convert(future.result()))
                return
            if future.status == "error":
                exc = future.exception()
                if isinstance(exc, distributed.KilledWorker):
                    pending.answer.set_result(failed(f"the Dask workers running it died: {_first_line(exc)}"))
                    return
                message = (f"cluster={self.address}: a task failed on a worker ({type(exc).__name__}: "
                           f"{_first_line(exc)}); check that ansor-mlir and IREE are installed there")
            else:
                message = (f"cluster={self.address}: the scheduler dropped a task ({future.status}): lost the "
                           "scheduler? what was measured is in the log; rerun with the same log to resume")
        except Exception as exc:  # fetching the result failed: the connection went
            message = f"cluster={self.address}: lost the result of a task ({_first_line(exc)})"
        pending.answer.set_exception(AnsorError(message))

    def _watch(self) -> None:
        with self._lock:
            if self._watcher is not None and self._watcher.is_alive():
                return
            self._closed.clear()
            self._watcher = threading.Thread(target=self._watch_loop, name="ansor-dask-watch", daemon=True)
            self._watcher.start()

    def _watch_loop(self) -> None:
        """Fail pending tasks that no worker can run for `worker_wait_s`; stop when nothing is pending."""
        since: dict[bool, float] = {}
        while not self._closed.wait(WATCH_INTERVAL_S):
            with self._lock:
                pending = list(self._pending.values())
            if not pending:
                return
            try:
                workers = self.workers() if self.client.status == "running" else None
            except Exception:  # the scheduler does not answer
                workers = None
            now = time.monotonic()
            for device in {p.device for p in pending}:
                able = workers is not None and any(
                    w.get("resources", {}).get(DEVICE, 0) > 0 if device
                    else all(w.get("resources", {}).get(k, 0) >= v for k, v in self.build_resources.items())
                    for w in workers.values())
                if able:
                    since.pop(device, None)
                    continue
                if now - since.setdefault(device, now) < self.worker_wait_s:
                    continue
                what = (f"no worker with a '{DEVICE}' resource" if device else "no worker that can build")
                if workers is None:
                    what = "the scheduler does not answer"
                self._fail([p for p in pending if p.device == device], AnsorError(
                    f"cluster={self.address}: {what} for {self.worker_wait_s:.0f} s while "
                    f"{'measurements' if device else 'builds'} wait: start one with "
                    f"`{START_WORKER.format(address=self.address)}`; what was measured is in the log, rerun "
                    "with the same log to resume"))

    def _fail(self, pending: list[_Pending], error: AnsorError) -> None:
        """Fail those of `pending` not settled meanwhile (whoever takes an item off `_pending` answers it)."""
        with self._lock:
            mine = [item for item in pending if self._pending.pop(item.future.key, None) is not None]
        for item in mine:
            item.future.cancel()
            item.answer.set_exception(error)

    def cancel(self, device: bool) -> None:
        """Cancel the pending builds (or measurements) of this run."""
        with self._lock:
            pending = [p for p in self._pending.values() if p.device == device]
        self._fail(pending, AnsorError(f"cluster={self.address}: cancelled"))

    def close(self) -> None:
        """Cancel what is pending, remove this run's timing processes from the workers, disconnect."""
        self._closed.set()
        with self._lock:
            pending = list(self._pending.values())
        self._fail(pending, AnsorError(f"cluster={self.address}: closed"))
        if self.client.status == "running":
            try:
                if self.plugin:
                    self.client.unregister_worker_plugin(self.plugin)
            except Exception:  # a worker gone meanwhile; its plugin went with it
                pass
            self.client.close(timeout=CONNECT_TIMEOUT_S)


@dataclass
class DaskBuilder(Builder):
    """Compiles on the cluster's workers (`dask_worker.build`: the local builder in a Dask task)."""

    cluster: DaskCluster
    template: LocalBuilder

    def submit(self, item: BuildInput | ProgramBuildInput) -> Future[BuildResult]:
        from ansor_mlir.measure import dask_worker

        return self.cluster.submit(
            "build", dask_worker.build, self.template, item, device=False, convert=lambda result: result,
            failed=lambda message: BuildResult(None, ErrorKind.COMPILE_ERROR, message, 0.0))

    def close(self) -> None:
        self.cluster.cancel(device=False)


@dataclass
class DaskRunner(Runner):
    """Checks and times on the cluster's device workers (`dask_worker.measure`: the local runner in a Dask
    task); closing it disconnects the cluster (the builder is done by then: the tuner closes it first)."""

    cluster: DaskCluster
    template: LocalRunner

    def submit(self, item: RunInput) -> Future[RunResult]:
        from ansor_mlir.measure import dask_worker

        return self.cluster.submit(
            "measure", dask_worker.measure, self.template, item, device=True,
            convert=lambda result: result,
            failed=lambda message: RunResult(MeasureResult(ErrorKind.RUNTIME_ERROR, message=message)))

    def submit_compare(self, item: CompareInput) -> Future[CompareResult]:
        from ansor_mlir.measure import dask_worker

        return self.cluster.submit(
            "compare", dask_worker.compare, self.template, item, device=True,
            convert=lambda result: result,
            failed=lambda message: CompareResult(error=ErrorKind.RUNTIME_ERROR, message=message))

    def notes(self) -> list[str]:
        return [self.cluster.describe()]

    def close(self) -> None:
        self.cluster.close()


def cluster_measurers(address: str, target: Target, compile_timeout_s: float = 60.0, run_timeout_s: float = 30.0,
                      min_time_s: float = 0.1, worker_wait_s: float = WORKER_WAIT_S) -> tuple[DaskBuilder,
                                                                                           DaskRunner]:
    """A builder and a runner on the cluster at `address`, checked (`connect`)."""
    cluster = connect(address, worker_wait_s=worker_wait_s)
    return cluster.builder(target, compile_timeout_s), cluster.runner(target, run_timeout_s, min_time_s)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]

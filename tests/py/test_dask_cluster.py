"""Building and measuring on a Dask cluster: a scheduler and workers as separate processes over loopback.

The cluster is what a user starts by hand (`dask scheduler`, `dask worker ADDR --resources device=1
--nthreads 1`); the tuner reaches it by its address only, and programs, inputs and outputs travel as bytes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ansor_mlir import api
from ansor_mlir.database.records import read_records
from ansor_mlir.errors import AnsorError
from ansor_mlir.measure.builder import BuildInput, BuiltProgram
from ansor_mlir.measure.dask_engine import DaskRunner, connect
from ansor_mlir.measure.inputs import decode_array, encode_array, make_inputs
from ansor_mlir.measure.local_runner import LocalRunner
from ansor_mlir.measure.runner import RunInput
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.tuning.tuner import task_module

START_S = 30.0


class Processes:
    """A scheduler and workers started as `python -m dask ...` processes; each is killed at the end."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.procs: list[subprocess.Popen] = []
        file = tmp / "scheduler.json"
        self.start("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(file))
        deadline = time.monotonic() + START_S
        while not file.exists() or not file.read_text().strip():
            assert time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.1)
        self.address = json.loads(file.read_text())["address"]

    def start(self, *args: str) -> subprocess.Popen:
        log = open(self.tmp / f"{args[0]}{len(self.procs)}.log", "w")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen([sys.executable, "-m", "dask", *args], stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(proc)
        return proc

    def worker(self, *resources: str) -> subprocess.Popen:
        """A worker with one thread and no nanny (killed, it stays dead); it has registered on return."""
        before = self.workers()
        flags = ["--resources", " ".join(resources)] if resources else []
        proc = self.start("worker", self.address, "--nthreads", "1", "--no-nanny", "--no-dashboard", *flags)
        deadline = time.monotonic() + START_S
        while len(self.workers()) <= len(before):
            assert time.monotonic() < deadline and proc.poll() is None, "the worker did not register"
            time.sleep(0.2)
        return proc

    def workers(self) -> dict[str, dict]:
        from distributed import Client

        with Client(self.address, timeout=10, set_as_default=False) as client:
            return client.scheduler_info(n_workers=-1)["workers"]

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Processes]:
    processes = Processes(tmp_path_factory.mktemp("dask"))
    try:
        processes.worker("device=1")
        yield processes
    finally:
        processes.close()


def test_tunes_on_a_cluster_named_by_its_address(cluster, small_mm, tmp_path):
    log = tmp_path / "cluster.jsonl"
    result = api.tune(small_mm, trials=4, log=log, progress=False, cluster=cluster.address)
    records = read_records(log)
    (worker,) = cluster.workers()
    measured = [r for r in records if r.result.median_s is not None]
    assert len(measured) >= 2 and all(r.ok for r in measured)  # every output matched IREE's default's
    assert {r.result.worker for r in measured} == {worker}
    assert all(r.result.device.endswith(":local-sync") for r in measured)
    assert len({r.candidate.identity for r in records if r.program is None}) == len(
        [r for r in records if r.program is None])
    (task,) = result.tasks
    assert task.trials == len([r for r in measured if r.program is None])  # the rest: whole-program checks
    # The tuned module carries a configuration exactly when a measured candidate was applied.
    applied = task.applied_record is not None and not task.applied_record.is_default
    configured = "compilation_info" in result.module or "translation_info" in result.module
    assert applied == configured, (task.applied_record, result.module[:400])


def test_programs_and_outputs_travel_as_bytes(cluster, small_task, target):
    """What a worker computes is right: IREE's default build, run there, matches numpy."""
    flow = compile_to_phase(task_module(small_task), target.compile_flags(), "flow", "task")
    arrays = make_inputs(small_task, seed=0)
    tuned = connect(cluster.address)
    try:
        (build,) = tuned.builder(target).build([BuildInput(small_task.key, flow, small_task.root_index, None)])
        assert build.ok
        run = tuned.runner(target, min_time_s=0.02).submit(
            RunInput(build.program, tuple(encode_array(a) for a in arrays), return_outputs=True)).result(60)
    finally:
        tuned.close()
    a, b, bias = arrays
    assert run.measured.ok and run.measured.worker in cluster.workers()
    np.testing.assert_allclose(decode_array(run.outputs[0]), np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-4)


def test_a_measurement_on_a_worker_that_dies_is_run_again_elsewhere(cluster, small_task, target):
    """A worker killed mid-measurement: Dask re-runs the task on the other worker; one result, from it."""
    from distributed import Client

    second = cluster.worker("device=1")
    flow = compile_to_phase(task_module(small_task), target.compile_flags(), "flow", "task")
    inputs = tuple(encode_array(a) for a in make_inputs(small_task, seed=0))
    session = connect(cluster.address)
    try:
        (build,) = session.builder(target).build([BuildInput(small_task.key, flow, small_task.root_index, None)])
        # Long enough (3 s of timed calls) to be killed while it runs.
        slow = DaskRunner(session, LocalRunner(target, min_time_s=3.0, max_repeats=10**9))
        future = slow.submit(RunInput(build.program, inputs))
        with Client(cluster.address, timeout=10, set_as_default=False) as client:
            deadline = time.monotonic() + START_S
            while not (busy := [w for w, keys in client.processing().items()
                                if any(str(k).startswith("ansor-measure") for k in keys)]):
                assert time.monotonic() < deadline, "the measurement never started"
                time.sleep(0.05)
            time.sleep(0.5)  # inside the timing loop
            pids = client.run(os.getpid, workers=busy)
        os.kill(pids[busy[0]], signal.SIGKILL)
        result = future.result(timeout=90)
    finally:
        session.close()
        second.kill()
        second.wait(timeout=10)
    assert result.measured.ok
    assert result.measured.worker != busy[0]  # measured (once) by the worker that survived


def test_bad_clusters_are_one_line_errors(tmp_path, small_mm, target):
    started = time.monotonic()
    with pytest.raises(AnsorError, match=r"no Dask scheduler answered in 2 s .*dask scheduler") as info:
        connect("tcp://127.0.0.1:1", connect_timeout_s=2)
    assert "\n" not in str(info.value) and time.monotonic() - started < 15
    with pytest.raises(AnsorError, match="expected a Dask scheduler address"):
        api.tune(small_mm, trials=2, log=tmp_path / "l.jsonl", cluster="nowhere")
    lonely = Processes(tmp_path)  # a scheduler whose only worker declares no device
    try:
        lonely.worker()
        with pytest.raises(AnsorError, match=r"no worker declares a 'device' resource .*--resources device=1") as info:
            connect(lonely.address, register_wait_s=1)
        assert "\n" not in str(info.value)
        # A cluster left without a device worker mid-run: what waits fails in one line, it does not hang.
        device = lonely.worker("device=1")
        session = connect(lonely.address, worker_wait_s=1)
        try:
            device.kill()
            device.wait(timeout=10)
            deadline = time.monotonic() + START_S
            while len(lonely.workers()) > 1:
                assert time.monotonic() < deadline, "the scheduler did not notice the worker's death"
                time.sleep(0.2)
            future = session.runner(target).submit(RunInput(BuiltProgram(b"", "task"), ()))
            with pytest.raises(AnsorError, match=r"no worker with a 'device' resource for 1 s .*--resources device=1"):
                future.result(timeout=30)
        finally:
            session.close()
    finally:
        lonely.close()


def test_ansor_opt_names_the_cluster_option(capsys):
    from ansor_mlir import cli
    from ansor_mlir.passes.pass_options import passes_help

    assert "cluster=<tcp://HOST:PORT>" in passes_help()
    mlir = Path(api.__file__).parent / "examples" / "matmul_bias_relu.mlir"
    assert cli.main([str(mlir), "--ansor-tune=cluster=ftp://h:1"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid cluster=ftp://h:1: unknown scheme 'ftp://'" in err

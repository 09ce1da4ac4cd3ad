"""The local runner: time programs one at a time in an isolated worker process.

One timing at a time, never two concurrently (this matters on a 2-core
machine): submissions queue behind a single thread. The worker
(`run_worker`) loads the VM module, checks the outputs against the
references, then times calls with the host clock: after `warmup` calls, at
least `min_repeats` and for at least `min_time_s`, at most `max_repeats`. A
crashing or hanging kernel kills only the worker; it is restarted and the
failure recorded. Programs and arrays arrive as bytes; they become scratch
files here only because the worker reads files. The worker times on the
target's runtime device: `local-sync` for one thread, else `local-task` with
`threads` workers (`Target.runtime_flags`, given on its command line).
"""

from __future__ import annotations

import hashlib
import json
import select
import socket
import subprocess
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.target import Target
from ansor_mlir.measure.builder import BuiltProgram
from ansor_mlir.measure.runner import CompareInput, CompareResult, RunInput, Runner, RunResult

# The worker records name for this host's runner (a cluster's runner names its Dask worker).
LOCAL_WORKER = "local"
# Where a whole program's weights wait for the worker (one archive per request, removed after it).
WEIGHTS_FILE = "weights.irpa"


@dataclass
class LocalRunner(Runner):
    times_one_device: ClassVar[bool] = True
    target: Target
    timeout_s: float = 30.0
    min_time_s: float = 0.1
    min_repeats: int = 5
    max_repeats: int = 1000
    warmup: int = 2
    _pool: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)
    _process: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _scratch: tempfile.TemporaryDirectory | None = field(default=None, init=False, repr=False)

    def submit(self, item: RunInput) -> Future[RunResult]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ansor-run")
        return self._pool.submit(self.run_now, item)

    def submit_compare(self, item: CompareInput) -> Future[CompareResult]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ansor-run")
        return self._pool.submit(self.compare_now, item)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            # A run still in flight (tuning interrupted) ends now, reported as a crashed worker.
            self._stop_worker()
            self._pool.shutdown(wait=True)
        self._pool = None
        self._stop_worker()
        if self._scratch is not None:
            self._scratch.cleanup()
        self._scratch = None

    def limit_s(self, item: RunInput) -> float:
        """The item's own limit, else a few times the calls this runner makes of a program like it."""
        if item.timeout_s is not None:
            return item.timeout_s
        calls = 1 + self.warmup + self.min_repeats
        return max(self.timeout_s, 3.0 * calls * (item.expected_s or 0.0))

    def run_now(self, item: RunInput) -> RunResult:
        """Measure one item in the calling thread (what `submit` queues; a Dask task calls it directly)."""
        scratch = self._scratch_dir()
        program = scratch / "program.vmfb"
        program.write_bytes(item.program.vmfb)
        request = {
            "device": self.target.runtime_device(),
            "vmfb": str(program),
            "function": item.program.function,
            "inputs": [self._array_file(data) for data in item.inputs],
            "references": [self._array_file(data) for data in item.references] if item.references else None,
            "save_outputs": str(scratch) if item.return_outputs else None,
            "warmup": self.warmup,
            "min_time_s": self.min_time_s,
            "min_repeats": self.min_repeats,
            "max_repeats": self.max_repeats,
            **self._weights(scratch, item.program),
        }
        try:
            result = self._answer(request, self.limit_s(item))
            return replace(result, measured=replace(result.measured, worker=LOCAL_WORKER, device=self.device_name()))
        finally:
            for path in [program, scratch / WEIGHTS_FILE, *scratch.glob("out*.npy")]:
                path.unlink(missing_ok=True)

    def compare_now(self, item: CompareInput) -> CompareResult:
        """Time programs alternately in the calling thread (what `submit_compare` queues)."""
        scratch = self._scratch_dir()
        paths = []
        for i, program in enumerate(item.programs):
            path = scratch / f"compare{i}.vmfb"
            path.write_bytes(program.vmfb)
            paths.append(path)
        request = {
            "device": self.target.runtime_device(),
            "devices": list(item.devices),
            "compare": [str(p) for p in paths],
            "function": item.programs[0].function,
            "inputs": [self._array_file(data) for data in item.inputs],
            "rounds": item.rounds,
            "min_round_s": item.min_round_s,
            **self._weights(scratch, item.programs[0]),
        }
        limit = item.timeout_s or max(self.timeout_s, 4.0 * item.rounds * item.min_round_s * len(paths))
        try:
            response = self._ask(request, limit)
        except (EOFError, OSError, ValueError):
            self._stop_worker()
            return CompareResult(error=ErrorKind.RUNTIME_ERROR, message="the timing worker crashed")
        finally:
            for path in [*paths, scratch / WEIGHTS_FILE]:
                path.unlink(missing_ok=True)
        if response is None:
            self._stop_worker()
            return CompareResult(error=ErrorKind.RUN_TIMEOUT, message=f"no answer in {limit:.0f}s")
        if "error" in response:
            return CompareResult(error=ErrorKind.RUNTIME_ERROR, message=response["error"])
        return CompareResult(tuple(tuple(s) for s in response["samples"]), wrong=tuple(response["wrong"]))

    @staticmethod
    def _weights(scratch: Path, program: BuiltProgram) -> dict:
        """The request's fields that hand the worker a program's weights (none for a task)."""
        if not program.parameters:
            return {}
        path = scratch / WEIGHTS_FILE
        path.write_bytes(program.parameters)
        return {"parameters": str(path), "parameter_scope": program.parameter_scope}

    def _answer(self, request: dict, limit: float) -> RunResult:
        try:
            response = self._ask(request, limit)
        except (EOFError, OSError, ValueError):
            self._stop_worker()
            return RunResult(MeasureResult(ErrorKind.RUNTIME_ERROR, message="the timing worker crashed"))
        if response is None:
            self._stop_worker()
            return RunResult(MeasureResult(ErrorKind.RUN_TIMEOUT, message=f"no answer in {limit:.0f}s"))
        if "error" in response:
            return RunResult(MeasureResult(ErrorKind.RUNTIME_ERROR, message=response["error"]))
        if response.get("wrong"):
            return RunResult(MeasureResult(ErrorKind.WRONG_ANSWER, max_abs_error=response["max_abs_error"],
                                           message="output differs from the reference"))
        outputs = tuple(self._take(path) for path in response.get("outputs", ()))
        measured = MeasureResult(
            error=ErrorKind.NONE,
            median_s=response["median"],
            spread_s=response["spread"],
            repeats=len(response["times"]),
            max_abs_error=response["max_abs_error"],
            times_s=tuple(response["times"]),
        )
        return RunResult(measured, outputs)

    def device_name(self) -> str:
        """The device the worker times on, as records name it: `HOST:local-sync`."""
        return f"{socket.gethostname()}:{self.target.runtime_device()}"

    def _scratch_dir(self) -> Path:
        if self._scratch is None:
            self._scratch = tempfile.TemporaryDirectory(prefix="ansor_run_")
        return Path(self._scratch.name)

    def _array_file(self, data: bytes) -> str:
        """A scratch file holding `data`, written once per distinct content (inputs repeat every run)."""
        path = self._scratch_dir() / f"{hashlib.blake2b(data, digest_size=16).hexdigest()}.npy"
        if not path.exists():
            path.write_bytes(data)
        return str(path)

    @staticmethod
    def _take(path: str) -> bytes:
        file = Path(path)
        data = file.read_bytes()
        file.unlink()
        return data

    def worker_command(self) -> list[str]:
        """The timing worker's command line: the target's runtime flags configure its device."""
        return [sys.executable, "-m", "ansor_mlir.measure.run_worker", *self.target.runtime_flags()]

    def _ensure_worker(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                self.worker_command(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        return self._process

    def _stop_worker(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait(timeout=5)
            for pipe in (process.stdin, process.stdout):
                pipe.close()

    def _ask(self, request: dict, timeout_s: float) -> dict | None:
        """Send one request; None if the worker did not answer in time."""
        worker = self._ensure_worker()
        worker.stdin.write(json.dumps(request) + "\n")
        worker.stdin.flush()
        ready, _, _ = select.select([worker.stdout], [], [], timeout_s)
        if not ready:
            return None
        line = worker.stdout.readline()
        if not line:
            raise EOFError("worker exited")
        return json.loads(line)

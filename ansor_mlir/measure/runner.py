"""The runner: time built candidates one at a time, check every answer.

One timing at a time, never two concurrently (this matters on a 2-core
machine). Each candidate runs on the task's fixed-seed inputs; its outputs
must match the reference (IREE's untuned build) or it is WRONG_ANSWER and can
never be chosen.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
from dataclasses import dataclass, field

from ansor_mlir.core.measure_result import BuildResult, ErrorKind, MeasureResult
from ansor_mlir.core.target import Target


@dataclass
class Runner:
    target: Target
    timeout_s: float = 30.0
    min_time_s: float = 0.1
    min_repeats: int = 5
    max_repeats: int = 1000
    _process: subprocess.Popen | None = field(default=None, repr=False)

    def _ensure_worker(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "ansor_mlir.measure.run_worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        return self._process

    def close(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=5)
        self._process = None

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

    def run(
        self,
        build: BuildResult,
        inputs: list[str],
        references: list[str] | None,
        save_outputs: list[str] | None = None,
        timeout_s: float | None = None,
    ) -> MeasureResult:
        """Check and time one build; `timeout_s` overrides the runner's limit (slow references)."""
        limit = timeout_s or self.timeout_s
        if build.error != ErrorKind.NONE or build.vmfb_path is None:
            return MeasureResult(error=build.error, compile_s=build.compile_s, message=build.message)
        request = {
            "device": self.target.runtime_device(),
            "vmfb": build.vmfb_path,
            "function": "task",
            "inputs": inputs,
            "references": references,
            "save_outputs": save_outputs,
            "min_time_s": self.min_time_s,
            "min_repeats": self.min_repeats,
            "max_repeats": self.max_repeats,
        }
        try:
            response = self._ask(request, limit)
            if response is None:
                self.close()
                return MeasureResult(ErrorKind.RUN_TIMEOUT, compile_s=build.compile_s,
                                     message=f"no answer in {limit:.0f}s")
        except (EOFError, OSError, ValueError):
            self.close()
            return MeasureResult(ErrorKind.RUNTIME_ERROR, compile_s=build.compile_s,
                                 message="the timing worker crashed")
        if "error" in response:
            return MeasureResult(ErrorKind.RUNTIME_ERROR, compile_s=build.compile_s,
                                 message=response["error"])
        if response.get("wrong"):
            return MeasureResult(ErrorKind.WRONG_ANSWER, compile_s=build.compile_s,
                                 max_abs_error=response["max_abs_error"],
                                 message="output differs from the reference")
        return MeasureResult(
            error=ErrorKind.NONE,
            median_s=response["median"],
            spread_s=response["spread"],
            repeats=len(response["times"]),
            compile_s=build.compile_s,
            max_abs_error=response["max_abs_error"],
            times_s=tuple(response["times"]),
        )

"""The local builder: `iree-compile` processes on this host, several at once.

Each compile is its own `iree-compile` process with a timeout and a memory
cap, so a pathological configuration costs one recorded failure, nothing more.
The module is written to a scratch file and read back: the result is bytes.
"""

from __future__ import annotations

import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from ansor_mlir.codegen.tuning_spec import attach_configs
from ansor_mlir.core.measure_result import ErrorKind
from ansor_mlir.core.target import Target
from ansor_mlir.errors import AnsorError
from ansor_mlir.measure.builder import Builder, BuildInput, BuildResult, BuiltProgram, ProgramBuildInput
from ansor_mlir.mlir.iree_compiler import DEFAULT_MEMORY_BYTES, compile_vmfb, first_error_line, tuning_spec_flags


@dataclass
class LocalBuilder(Builder):
    target: Target
    workers: int = 2
    timeout_s: float = 60.0
    memory_bytes: int = DEFAULT_MEMORY_BYTES
    _pool: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)

    def submit(self, item: BuildInput | ProgramBuildInput) -> Future[BuildResult]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=max(1, self.workers), thread_name_prefix="ansor-build")
        return self._pool.submit(self.build_now, item)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool = None

    def build_now(self, item: BuildInput | ProgramBuildInput) -> BuildResult:
        """Compile one item in the calling thread (what `submit` queues; a Dask task calls it directly)."""
        if isinstance(item, ProgramBuildInput):
            return self._build_program(item)
        start = time.perf_counter()
        text = item.flow_text
        if item.config is not None or item.strategy is not None:
            configs = {item.task_key: (item.root_index, item.config)} if item.strategy is None else {}
            strategies = {item.task_key: item.strategy} if item.strategy is not None else {}
            try:
                text, applied = attach_configs(item.flow_text, configs, "candidate", strategies)
            except AnsorError as exc:
                return BuildResult(None, ErrorKind.INVALID_SCHEDULE, str(exc), 0.0)
            if item.task_key not in applied:
                return BuildResult(None, ErrorKind.INVALID_SCHEDULE, "root op not found", 0.0)
        return self._compile(text, self.target.codegen_flags(), item.function, self.timeout_s, start)

    def _build_program(self, item: ProgramBuildInput) -> BuildResult:
        """A whole program from its source: the target's flags, and the item's tuning spec if it has one."""
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="ansor_spec_") as tmp:
            target = replace(self.target, threads=1) if item.one_thread else self.target
            flags = target.compile_flags()
            if item.spec_text is not None:
                spec = Path(tmp) / "spec.mlir"
                spec.write_text(item.spec_text)
                flags = [*flags, *tuning_spec_flags(spec)]
            return self._compile(item.source_text, flags, item.function, item.timeout_s or self.timeout_s, start)

    def _compile(self, text: str, flags: list[str], function: str, timeout_s: float, start: float) -> BuildResult:
        """`text` to a program with `flags` (a flow-level module carries its target: it takes the target's
        codegen flags alone, `Target.codegen_flags`)."""
        with tempfile.TemporaryDirectory(prefix="ansor_build_") as tmp:
            out = Path(tmp) / "program.vmfb"
            result = compile_vmfb(text, flags, out, timeout_s=timeout_s, memory_bytes=self.memory_bytes)
            vmfb = out.read_bytes() if result.ok else b""
        elapsed = time.perf_counter() - start
        if result.timed_out:
            return BuildResult(None, ErrorKind.COMPILE_TIMEOUT, f"over {timeout_s:.0f}s", elapsed)
        if not result.ok:
            return BuildResult(None, ErrorKind.COMPILE_ERROR, first_error_line(result.stderr), elapsed)
        return BuildResult(BuiltProgram(vmfb, function), ErrorKind.NONE, "", elapsed)

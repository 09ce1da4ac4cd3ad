"""The builder: compile candidates to VM modules, several at once.

Each compile is its own `iree-compile` process with a timeout and a memory
cap, so a pathological configuration costs one recorded failure, nothing more.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ansor_mlir.codegen.tuning_spec import attach_configs
from ansor_mlir.core.measure_result import BuildResult, ErrorKind
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import IreeConfig
from ansor_mlir.errors import AnsorError
from ansor_mlir.mlir.iree_compiler import DEFAULT_MEMORY_BYTES, compile_vmfb, first_error_line


@dataclass(frozen=True)
class BuildInput:
    """One thing to compile: a task's flow-level module and a configuration for its root."""

    task_key: str
    flow_text: str
    root_index: int
    config: IreeConfig | None
    out_path: Path
    # A transform-dialect strategy (name, text) that is the dispatch's codegen.
    strategy: tuple[str, str] | None = None


@dataclass(frozen=True)
class Builder:
    target: Target
    workers: int = 2
    timeout_s: float = 60.0
    memory_bytes: int = DEFAULT_MEMORY_BYTES

    def build(self, inputs: list[BuildInput]) -> list[BuildResult]:
        with ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
            return list(pool.map(self._build_one, inputs))

    def _build_one(self, item: BuildInput) -> BuildResult:
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
        result = compile_vmfb(
            text,
            [],
            item.out_path,
            timeout_s=self.timeout_s,
            memory_bytes=self.memory_bytes,
        )
        elapsed = time.perf_counter() - start
        if result.timed_out:
            return BuildResult(None, ErrorKind.COMPILE_TIMEOUT, f"over {self.timeout_s:.0f}s", elapsed)
        if not result.ok:
            return BuildResult(None, ErrorKind.COMPILE_ERROR, first_error_line(result.stderr), elapsed)
        return BuildResult(str(item.out_path), ErrorKind.NONE, "", elapsed)

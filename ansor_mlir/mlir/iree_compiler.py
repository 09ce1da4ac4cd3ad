"""Thin, safe wrappers around the real `iree-compile` / `iree-opt` binaries.

Every call runs in a child process with a wall-clock timeout and an address
space cap: a bad configuration can keep IREE compiling for many minutes on
gigabytes of memory, and one candidate must not stall or starve the search
(CHANGELOG.md, "Limits the code keeps").
"""

from __future__ import annotations

import os
import resource
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from iree.compiler.tools import binaries

from ansor_mlir.errors import AnsorError

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MEMORY_BYTES = 4 * 1024**3


@dataclass(frozen=True)
class ToolResult:
    returncode: int
    stdout: bytes
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def tool_path(name: str) -> str:
    path = binaries.find_tool(name)
    if not path:
        raise AnsorError(f"cannot find the IREE tool '{name}': install iree-base-compiler==3.13.*")
    return path


def _limit_memory(max_bytes: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))

    return apply


def run_tool(
    name: str,
    args: list[str],
    stdin: bytes | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
) -> ToolResult:
    """Run an IREE tool; a timeout or crash is returned, never raised."""
    cmd = [tool_path(name), *args]
    try:
        proc = subprocess.run(
            cmd,
            input=stdin,
            capture_output=True,
            timeout=timeout_s,
            preexec_fn=_limit_memory(memory_bytes),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        return ToolResult(-9, exc.stdout or b"", (exc.stderr or b"").decode(errors="replace"), True)
    return ToolResult(proc.returncode, proc.stdout, proc.stderr.decode(errors="replace"))


def first_error_line(stderr: str) -> str:
    """The most useful single line of a compiler diagnostic dump (a crash's stack trace is not one)."""
    for line in stderr.splitlines():
        if "error:" in line or line.startswith(("LLVM ERROR", "Assertion")) or ": Assertion `" in line:
            return line.strip()[:500]
    if "Stack dump:" in stderr or "crash backtrace" in stderr:
        return "the compiler crashed (no diagnostic): report it to IREE with the input"
    lines = [line for line in stderr.splitlines() if line.strip()]
    return (lines[-1] if lines else "no diagnostic").strip()[:500]


def compile_to_phase(mlir: str, flags: list[str], phase: str, what: str) -> str:
    """Compile MLIR text up to an IREE phase (e.g. `flow`) and return the text."""
    flags = [*flags, *winograd_flags(mlir)]
    result = run_tool("iree-compile", [*flags, f"--compile-to={phase}", "-"], stdin=mlir.encode())
    if not result.ok:
        raise AnsorError(f"{what}: IREE could not compile it: {first_error_line(result.stderr)}")
    return result.stdout.decode()


# IREE runs dispatch creation again over a flow-level module's executables; its pad-to-insert-slice pass then
# turns a pad that a dispatch region fused into a convolution (`frontend.pad_fusion`) into a fill and an
# insert_slice that the convolution's tiling cannot take ("large vector sizes"). Native pad handling keeps it.
FLOW_PAD_FLAG = "--iree-flow-enable-pad-handling"


# A program holding a Winograd filter transform (`frontend.winograd`, which marks it) is built with this flag: IREE
# hoists (and evaluates once) only constant expressions that grow their input by less than its threshold (1 MiB by
# default), and a transformed filter is 64/9 the size of its weights. The rewrite's choice of convolutions bounds
# the growth.
WINOGRAD_HOIST_FLAG = "--iree-opt-const-expr-max-size-increase-threshold=4294967296"
WINOGRAD_FILTER_MARK = "ansor.winograd_filter"


def winograd_flags(mlir: str) -> list[str]:
    """Flags a program needs to build as the Winograd rewrite meant it: its filter transforms hoisted."""
    return [WINOGRAD_HOIST_FLAG] if WINOGRAD_FILTER_MARK in mlir else []


def tuning_spec_flags(spec: Path | str) -> list[str]:
    """Flags that build a program with a tuning spec.

    IREE 3.13 sometimes deadlocks loading the spec when it configures executables on several threads (a mutex in
    `getOrLoadTransformLibraryModule`); single-threaded passes do not, and cost these small builds nothing
    measurable (CHANGELOG.md, "Limits the code keeps").
    """
    return [f"--iree-codegen-tuning-spec-path={spec}", "--mlir-disable-threading"]


def flow_level_flags(mlir: str) -> list[str]:
    """Flags a flow-level module needs to build as it was formed: pad handling when an executable holds a pad."""
    return [FLOW_PAD_FLAG] if "flow.executable" in mlir and "tensor.pad" in mlir else []


def compile_vmfb(
    mlir: str,
    flags: list[str],
    out_path: Path,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
) -> ToolResult:
    """Compile MLIR text to a VM flatbuffer at `out_path`."""
    flags = [*flags, *flow_level_flags(mlir), *winograd_flags(mlir)]
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
        f.write(mlir)
        src = f.name
    try:
        return run_tool(
            "iree-compile",
            [*flags, src, "-o", str(out_path)],
            timeout_s=timeout_s,
            memory_bytes=memory_bytes,
        )
    finally:
        os.unlink(src)

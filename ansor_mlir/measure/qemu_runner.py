"""A runner that checks programs of another architecture under qemu-user: correctness, never time.

An aarch64 program built on an x86-64 host runs here under `qemu-aarch64-static`
with IREE's own aarch64 `iree-run-module` (from the aarch64 `iree-base-runtime`
wheel; `tools/install_qemu_aarch64.sh` installs both). Emulation is orders of
magnitude slower than the hardware and its speed says nothing about it
(docs/reports/aarch64.md), so this runner
reports no time: a program whose outputs match the references is
`NOT_MEASURED` with its largest error ("verified under qemu"), a mismatch
`WRONG_ANSWER`. Outputs are compared by the timing worker's own check
(`run_worker.compare`). Performance needs the real machine: export a batch
for it (`measure.batch_bundle`, `measure.offline_runner`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ansor_mlir.core.cpu_catalog import ARCHITECTURES
from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.measure.arrays import decode_array
from ansor_mlir.measure.run_worker import compare
from ansor_mlir.measure.runner import RunInput, Runner, RunResult

IREE_RUNTIME_VERSION = "3.13.0"
# Where tools/install_qemu_aarch64.sh unpacks the runtime wheel (overridden by ANSOR_QEMU_CACHE).
CACHE_ENV = "ANSOR_QEMU_CACHE"
INSTALL_HINT = "install it with: bash tools/install_qemu_aarch64.sh"


@dataclass(frozen=True)
class EmulatedRuntime:
    """What running `arch` programs here takes: the emulator, the architecture's C runtime, its iree-run-module."""

    arch: str
    emulator: str
    sysroot: str
    run_module: str

    def command(self, *args: str) -> list[str]:
        return [self.emulator, "-L", self.sysroot, self.run_module, *args]


def runtime_cache(arch: str) -> Path:
    root = os.environ.get(CACHE_ENV) or str(Path.home() / ".cache" / "ansor-mlir" / arch)
    return Path(root) / f"iree-base-runtime-{IREE_RUNTIME_VERSION}" / "iree" / "_runtime_libs"


def find_emulated_runtime(arch: str) -> EmulatedRuntime | str:
    """The emulated runtime for `arch`, or why there is none (a sentence naming what is missing and the fix)."""
    described = ARCHITECTURES.get(arch)
    if described is None:
        return f"no emulator is known for {arch} programs"
    emulator = shutil.which(described.emulator)
    if emulator is None:
        return f"{described.emulator} is not installed: {INSTALL_HINT}"
    if not Path(described.sysroot, "lib").is_dir():
        return f"the {arch} C runtime ({described.sysroot}) is not installed: {INSTALL_HINT}"
    tool = runtime_cache(arch) / "iree-run-module"
    if not os.access(tool, os.X_OK):
        return f"IREE's {arch} iree-run-module is not in {tool.parent}: {INSTALL_HINT}"
    return EmulatedRuntime(arch, emulator, described.sysroot, str(tool))


@dataclass
class QemuRunner(Runner):
    """Runs each program once under the emulator and checks every output against the references."""

    runtime: EmulatedRuntime
    timeout_s: float = 600.0
    _pool: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)

    def submit(self, item: RunInput) -> Future[RunResult]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ansor-qemu")
        return self._pool.submit(self.run_now, item)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool = None

    def run_now(self, item: RunInput) -> RunResult:
        if not item.references:
            return RunResult(MeasureResult(ErrorKind.RUNTIME_ERROR,
                                           message="the qemu runner checks against references; none were given"))
        with tempfile.TemporaryDirectory(prefix="ansor_qemu_") as tmp:
            folder = Path(tmp)
            (folder / "program.vmfb").write_bytes(item.program.vmfb)
            args = [f"--module={folder / 'program.vmfb'}", "--device=local-sync", f"--function={item.program.function}"]
            for i, data in enumerate(item.inputs):
                (folder / f"in{i}.npy").write_bytes(data)
                args.append(f"--input=@{folder / f'in{i}.npy'}")
            outputs = [folder / f"out{i}.npy" for i in range(len(item.references))]
            args += [f"--output=@{path}" for path in outputs]
            limit = item.timeout_s or self.timeout_s
            try:
                done = subprocess.run(self.runtime.command(*args), capture_output=True, text=True, timeout=limit)
            except subprocess.TimeoutExpired:
                return RunResult(MeasureResult(ErrorKind.RUN_TIMEOUT, message=f"no answer under qemu in {limit:.0f}s"))
            if done.returncode != 0 or not all(p.exists() for p in outputs):
                lines = [line for line in done.stderr.splitlines() if line.strip()]
                return RunResult(MeasureResult(ErrorKind.RUNTIME_ERROR,
                                               message=f"under qemu: {lines[-1] if lines else done.returncode}"[:500]))
            produced = tuple(path.read_bytes() for path in outputs)
        return RunResult(self.verdict(produced, item.references), produced if item.return_outputs else ())

    def verdict(self, produced: tuple[bytes, ...], references: tuple[bytes, ...]) -> MeasureResult:
        worst = 0.0
        for out, ref in zip(produced, references, strict=True):
            ok, error = compare(decode_array(out), decode_array(ref))
            worst = max(worst, error)
            if not ok:
                return MeasureResult(ErrorKind.WRONG_ANSWER, max_abs_error=worst,
                                     message=f"under qemu-{self.runtime.arch}: output differs from the reference")
        return MeasureResult(ErrorKind.NOT_MEASURED, max_abs_error=worst,
                             message=f"verified under qemu-{self.runtime.arch} (correctness only, not timed)")

"""The contenders: how each is prepared once (compiled, tuned) and what call is timed.

A contender's `prepare` returns a `Prepared` (a zero-argument call to time
and a `fetch` that returns its outputs in the workload's layout for the
numpy check) or raises `Unavailable` with a status and a reason a reader of
the report can act on ("PyTorch not installed", "not tunable yet: ...").
Unavailability is data in the results, never a crash.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ansor_bench.workloads import Workload, suite_args
from ansor_mlir.core.target import Target
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.program_rewrites import DEFAULT_REWRITES

IREE_DATA_TILING = ("--iree-opt-data-tiling=true",)
IREE_UKERNELS = ("--iree-opt-data-tiling=true", "--iree-llvmcpu-enable-ukernels=all")
NUMPY_GEMMS = ("GMM", "TBS")


class Unavailable(Exception):
    """A contender that cannot run a workload; `status` is what the report shows."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Prepared:
    """A contender ready to time on one workload."""

    call: Callable[[], object]
    fetch: Callable[[], list[np.ndarray]]
    prepare_s: float = 0.0
    curve: tuple[float, ...] = ()
    trials: int | None = None
    note: str = ""


@dataclass(frozen=True)
class Settings:
    """What every contender is prepared with: one target, one budget, one output directory."""

    target: Target
    trials: int
    tvm_trials: int
    out_dir: Path
    seed: int = 0
    threads: int = 1
    rewrites: str = DEFAULT_REWRITES  # ansor-mlir's program rewrites (its `rewrites=`)


@dataclass(frozen=True)
class Contender:
    key: str
    name: str
    prepare: Callable[[Workload, list[np.ndarray], Settings], Prepared] = field(repr=False)


def op_args(workload: Workload) -> dict[str, int]:
    """The workload's shape row keyed by the suite's argument names (N, H, W, CI, ...)."""
    return dict(zip(suite_args(workload.name), workload.shape, strict=True))


def slug(workload: Workload) -> str:
    """A file-name-safe form of the workload label."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", workload.label).strip("_")


# --------------------------------------------------------------------------- IREE


def _build(mlir: str, flags: list[str], out: Path) -> Path:
    from ansor_mlir.mlir.iree_compiler import compile_vmfb, first_error_line

    out.parent.mkdir(parents=True, exist_ok=True)
    result = compile_vmfb(mlir, flags, out)
    if not result.ok:
        reason = "timed out" if result.timed_out else first_error_line(result.stderr)
        raise Unavailable("failed", f"iree-compile: {reason}")
    return out


def _iree_prepared(vmfb: Path, workload: Workload, inputs: list[np.ndarray], settings: Settings,
                   prepare_s: float, device: str | None = None, **extra) -> Prepared:
    from ansor_mlir.measure.vm_call import timed_call
    from ansor_mlir.mlir.iree_module import CompiledModel

    program = CompiledModel(vmfb.read_bytes(), workload.func_name, device or settings.target.runtime_device())
    # Calls rotate over several placements of the inputs, one per timing round: a contender must not win or lose
    # by where its buffers happen to sit (the same binary measured 2.4 or 3.2 ms for a 512^3 matmul by placement alone).
    # Timed calls go to the VM directly (`vm_call`): the Python invoker's argument handling is not the program's.
    call = timed_call(program, inputs)

    def fetch() -> list[np.ndarray]:
        result = program(*inputs)
        return list(result) if isinstance(result, tuple) else [result]

    return Prepared(call, fetch, prepare_s, **extra)


def iree_contender(key: str, name: str, extra_flags: tuple[str, ...]) -> Contender:
    """IREE's own build of the workload with fixed flags (no tuning)."""

    def prepare(workload: Workload, inputs: list[np.ndarray], settings: Settings) -> Prepared:
        start = time.perf_counter()
        vmfb = _build(workload.mlir, [*settings.target.iree_default_flags(), *extra_flags],
                      settings.out_dir / "vmfb" / f"{slug(workload)}.{key}.vmfb")
        return _iree_prepared(vmfb, workload, inputs, settings, time.perf_counter() - start,
                              note=" ".join(extra_flags))

    return Contender(key, name, prepare)


def prepare_iree_rewritten(workload: Workload, inputs: list[np.ndarray], settings: Settings) -> Prepared:
    """IREE's own configurations on the program after ansor-mlir's program rewrites: what rewriting alone gains."""
    from ansor_mlir.frontend.program_rewrites import parse_rewrites, rewrite_program

    start = time.perf_counter()
    changed = rewrite_program(workload.mlir, parse_rewrites(settings.rewrites), workload.label)
    if not changed.applied:
        raise Unavailable("skipped", "no program rewrite applies")
    vmfb = _build(changed.text, settings.target.iree_default_flags(),
                  settings.out_dir / "vmfb" / f"{slug(workload)}.iree-rw.vmfb")
    return _iree_prepared(vmfb, workload, inputs, settings, time.perf_counter() - start, note=changed.summary())


def ansor_curve(log: Path, weights: dict[str, int], target_key: str) -> tuple[float, ...]:
    """Weighted sum of each task's best time so far, after every trial in log order.

    A point exists once every task has a measurement (IREE's default is
    measured first, so from the first trial of the last task on).
    """
    from ansor_mlir.database.records import read_records

    best: dict[str, float] = {}
    curve = []
    for record in read_records(log):
        if record.target != target_key or record.task_key not in weights:
            continue
        if record.ok:
            best[record.task_key] = min(best.get(record.task_key, float("inf")), record.result.median_s)
        if len(best) == len(weights):
            curve.append(sum(weights[k] * s for k, s in best.items()))
    return tuple(curve)


def prepare_ansor(workload: Workload, inputs: list[np.ndarray], settings: Settings) -> Prepared:
    """Tune with the public API, then build the returned module with plain iree-compile."""
    from ansor_mlir import api
    from ansor_mlir.tuning.device_choice import build_target

    log = settings.out_dir / "logs" / f"{slug(workload)}.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    try:
        result = api.tune(workload.mlir, settings.target, trials_per_task=settings.trials, log=log,
                          seed=settings.seed, progress=False, name=workload.label,
                          rewrites=settings.rewrites)
    except AnsorError as exc:
        status = "not tunable yet" if "nothing to tune" in str(exc) else "failed"
        raise Unavailable(status, str(exc)) from None
    # Built for the device it runs on: on one thread without the fences of a threaded build (`build_target`).
    vmfb = _build(result.module, build_target(settings.target, result.device).compile_flags(),
                  settings.out_dir / "vmfb" / f"{slug(workload)}.ansor.vmfb")
    weights = {r.task.key: r.task.weight for r in result.tasks}
    curve = ansor_curve(log, weights, settings.target.key)
    tasks = len(result.tasks)

    def x(value: float | None) -> str:
        return f"{value:.2f}x" if value else "-"

    # The log's speedup (each task timed alone) beside the program's (whole-program verification).
    def short(task) -> str:
        return task.name.split("_dispatch")[-1] or task.name

    checks = "; ".join(f"{short(r.task)}: log {x(r.speedup)}, program "
                       f"{x(r.program_speedup)}{' (fell back to IREE default)' if r.fell_back else ''}"
                       f"{f' (configured as {short(r.configured_by)}: same root op)' if r.configured_by else ''}"
                       for r in result.tasks)
    # At threads > 1 the tuned program runs on the device it ran fastest on (`tuning.device_choice`).
    device = "" if result.device == settings.target.runtime_device() else f"; runs on {result.device}"
    # A rewritten program that lost to the program as given is dropped (`tuning.rewrite_check`).
    check = result.rewrite_check
    if check is not None and not check.kept and check.check is not None:
        device += (f"; rewrites dropped: the program as given ran {check.check.default_s * 1e3:.3f} ms against "
                   f"{check.check.tuned_s * 1e3:.3f} ms tuned with them, so IREE's default of it is timed")
    elif check is not None and not check.kept:
        device += f"; rewrites dropped ({check.reason}), so IREE's default of the program as given is timed"
    # At threads > 1, part of each task's trials ran on one thread first (`tuning.one_thread_start`).
    first = sum(r.trials for r in result.one_thread)
    split = f" (the first {result.one_thread[0].trials} of each on one thread)" if first else ""
    return _iree_prepared(vmfb, workload, inputs, settings, time.perf_counter() - start, result.device,
                          curve=curve, trials=first + sum(r.trials for r in result.tasks),
                          note=f"{tasks} task{'s' * (tasks != 1)} tuned, {settings.trials} trials each{split}; "
                               f"{checks}{device}")


# --------------------------------------------------------------------------- other frameworks


def prepare_numpy(workload: Workload, inputs: list[np.ndarray], settings: Settings) -> Prepared:
    """numpy's matmul (its BLAS) where the workload is a GEMM."""
    if workload.name not in NUMPY_GEMMS:
        raise Unavailable("skipped", "not a GEMM")
    if workload.name == "GMM":
        a, b = inputs
    else:
        a, b = inputs[0].transpose(0, 2, 1, 3), inputs[1].transpose(0, 2, 3, 1)

    def call() -> np.ndarray:
        return np.matmul(a, b)

    return Prepared(call, lambda: [call()])


def prepare_torch(workload: Workload, inputs: list[np.ndarray], settings: Settings) -> Prepared:
    try:
        from ansor_bench.torch_ops import torch_op

        op = torch_op(workload.name, op_args(workload), inputs, settings.threads)
    except ImportError:
        raise Unavailable("skipped", "PyTorch not installed (pip install -e '.[bench]')") from None
    except KeyError:
        raise Unavailable("skipped", f"no PyTorch form for {workload.name}") from None
    return Prepared(op.call, op.fetch, note="NCHW/OIHW, converted before timing")


def prepare_tvm(workload: Workload, inputs: list[np.ndarray], settings: Settings) -> Prepared:
    try:
        import tvm  # noqa: F401

        from ansor_bench.tvm_ops import tvm_op
    except ImportError as exc:
        raise Unavailable("skipped", f"TVM not installed (pip install -e '.[bench]'): {exc}") from None
    work_dir = settings.out_dir / "tvm" / slug(workload)
    start = time.perf_counter()
    try:
        op = tvm_op(workload.name, op_args(workload), inputs, list(workload.output_shapes), settings.tvm_trials,
                    work_dir, settings.seed, settings.threads)
    except KeyError:
        raise Unavailable("skipped", f"no TVM expression for {workload.name}") from None
    except Exception as exc:  # noqa: BLE001 - TVM raises many types; the reason goes in the report
        raise Unavailable("failed", f"MetaSchedule: {str(exc).strip().splitlines()[-1][:300]}") from None
    return Prepared(op.call, op.fetch, time.perf_counter() - start, op.curve, op.trials,
                    note=f"mcpu={_tvm_cpu()}")


def prepare_halide(workload: Workload, inputs: list[np.ndarray], settings: Settings) -> Prepared:
    """Halide's Adams2019 autoscheduler: one search by its cost model, no measurements, then a JIT build."""
    try:
        import halide

        from ansor_bench.halide_ops import EXPRESSIONS, halide_op
    except ImportError as exc:
        raise Unavailable("skipped", f"Halide not installed (pip install -e '.[bench]'): {exc}") from None
    if workload.name not in EXPRESSIONS:
        raise Unavailable("skipped", f"no Halide expression for {workload.name} (ansor_bench/halide_ops.py "
                                     f"expresses {', '.join(EXPRESSIONS)})")
    start = time.perf_counter()
    try:
        op = halide_op(workload.name, op_args(workload), inputs, workload.output_shapes[0], settings.threads)
    except FileNotFoundError as exc:
        raise Unavailable("skipped", str(exc)) from None
    except halide.HalideError as exc:
        raise Unavailable("failed", f"Halide: {str(exc).strip().splitlines()[-1][:300]}") from None
    return Prepared(op.call, op.fetch, time.perf_counter() - start, trials=0,
                    note=f"{op.autoschedule_s:.3g} s autoscheduling (parallelism={settings.threads}), "
                         f"{op.compile_s:.2f} s JIT; target {op.target}")


def _tvm_cpu() -> str:
    from tvm.target import codegen

    return codegen.llvm_get_system_cpu()


CONTENDERS: dict[str, Contender] = {
    c.key: c
    for c in (
        Contender("ansor", "ansor-mlir tuned", prepare_ansor),
        iree_contender("iree", "IREE default", ()),
        Contender("iree-rw", "IREE default, rewritten", prepare_iree_rewritten),
        iree_contender("iree-dt", "IREE data-tiling", IREE_DATA_TILING),
        iree_contender("iree-uk", "IREE DT+ukernels", IREE_UKERNELS),
        Contender("torch", "PyTorch", prepare_torch),
        Contender("numpy", "numpy", prepare_numpy),
        Contender("tvm", "TVM MetaSchedule", prepare_tvm),
        Contender("halide", "Halide Adams2019", prepare_halide),
    )
}


def select_contenders(keys: list[str] | None) -> list[Contender]:
    """Contenders by key, in the canonical order; unknown keys are a user error."""
    if not keys:
        return list(CONTENDERS.values())
    unknown = [k for k in keys if k not in CONTENDERS]
    if unknown:
        raise AnsorError(f"unknown contender(s) {', '.join(unknown)}: choose from {', '.join(CONTENDERS)}")
    return [c for k, c in CONTENDERS.items() if k in keys]

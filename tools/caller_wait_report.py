"""How the calling thread waits for IREE's task system, and what it costs a threaded call; writes a doc.

    python tools/caller_wait_report.py [--ops GMM,softmax] [--threads 2] [--rounds 6] \\
        [--docs docs/reports/caller_wait.md]

At `threads=2` on a 2-vCPU guest, IREE's programs took 0.6-0.8x PyTorch's
time on small ops while their kernels matched PyTorch's on one thread. The
call has three threads for two vCPUs: two task workers and the caller, which
waits inside the call (`hal.fence.await`). This report builds IREE's default
of each op twice, the normal synchronous function and the same program with
`--iree-execution-model=async-external`, as `Target.compile_flags` builds every program for
threads > 1 since this report (it takes a wait and a signal fence
and returns once the work is queued), and times, in alternated rounds of
back-to-back calls on one `local-task` device:

- `invoke`: the synchronous function; IREE's own wait, inside the call.
- `fence.wait`: the asynchronous function, then `HalFence.wait()` (IREE's wait again, from Python).
- `yielding poll`: the asynchronous function, then `wait(timeout=0)` in a loop that yields the vCPU
  (`os.sched_yield`) between polls, so a worker that needs this vCPU gets it.

Per mode: the per-call median, 90th and 99th percentiles and the mean (the
mean counts the rare stalled calls a median hides), and the calling
thread's own CPU time per call (`RUSAGE_THREAD`): a caller that spins while
it waits burns it. PyTorch's call at the same thread count is timed beside
them when torch is installed.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ansor_bench.heap import keep_freed_memory  # noqa: E402
from ansor_bench.report import cpu_model, git_commit  # noqa: E402
from ansor_bench.workloads import make_workload, suite_args  # noqa: E402
from ansor_mlir.core.target import ASYNC_EXECUTION_FLAG, detect_host  # noqa: E402
from ansor_mlir.frontend.target_resolution import resolve_target  # noqa: E402
from ansor_mlir.measure.round_order import round_order  # noqa: E402
from ansor_mlir.mlir.iree_compiler import compile_vmfb  # noqa: E402
from ansor_mlir.mlir.runtime_device import runtime_device  # noqa: E402
from ansor_mlir.mlir.vm_invoke import bound_call, fenced_call  # noqa: E402

SHAPES = {"GMM": (1, 128, 128, 128), "softmax": (1536, 128), "NRM": (1, 256, 256)}


@dataclass
class ModeTimes:
    """Per-call seconds and the caller thread's CPU seconds, over all rounds of one mode."""

    calls: list[float] = field(default_factory=list)
    caller_cpu_s: float = 0.0

    def row(self, name: str) -> str:
        p50, p90, p99 = (float(np.percentile(self.calls, q)) * 1e6 for q in (50, 90, 99))
        mean = statistics.fmean(self.calls) * 1e6
        cpu = self.caller_cpu_s / len(self.calls) * 1e6
        return f"| {name} | {p50:.1f} | {p90:.1f} | {p99:.1f} | {mean:.1f} | {cpu:.1f} |"


def thread_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_utime + usage.ru_stime


def load(device, vmfb: Path, function: str):
    import iree.runtime as rt

    ctx = rt.SystemContext(config=rt.Config(device=device))
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb.read_bytes()))
    return ctx.modules.module[function]


def time_modes(calls: dict[str, Callable[[], object]], rounds: int, round_s: float) -> dict[str, ModeTimes]:
    """Alternated rounds of back-to-back calls, each after a short untimed warm-up."""
    times = {name: ModeTimes() for name in calls}
    for round_index in range(rounds):
        for name, call in round_order(list(calls.items()), round_index):
            warm_until = time.perf_counter() + round_s / 4
            while time.perf_counter() < warm_until:
                call()
            cpu0, end = thread_cpu_s(), time.perf_counter() + round_s
            per_call = []
            while time.perf_counter() < end:
                start = time.perf_counter()
                call()
                per_call.append(time.perf_counter() - start)
            times[name].caller_cpu_s += thread_cpu_s() - cpu0
            times[name].calls.extend(per_call)
    return times


def torch_call(name: str, shape: tuple[int, ...], inputs: list[np.ndarray], threads: int):
    try:
        from ansor_bench.torch_ops import torch_op
    except ImportError:
        return None
    try:
        return torch_op(name, dict(zip(suite_args(name), shape, strict=True)), inputs, threads).call
    except (ImportError, KeyError):
        return None


def report_op(name: str, threads: int, rounds: int, round_s: float, out_dir: Path) -> list[str]:
    import iree.runtime as rt

    workload = make_workload(name, SHAPES[name])
    target = resolve_target(detect_host(threads=threads))
    vmfbs = {}
    base = [flag for flag in target.compile_flags() if flag != ASYNC_EXECUTION_FLAG]
    for model, extra in (("sync", []), ("async", [ASYNC_EXECUTION_FLAG])):
        vmfbs[model] = out_dir / f"{name}.{model}.vmfb"
        built = compile_vmfb(workload.mlir, [*base, *extra], vmfbs[model])
        if not built.ok:
            return [f"{name}: IREE did not build it ({model}): {built.stderr.strip().splitlines()[-1:]}"]
    device = runtime_device(target.runtime_device())
    inputs = workload.inputs()
    arrays = [rt.asdevicearray(device, x) for x in inputs]
    reference = workload.reference(inputs)[0]
    sync_fn, async_fn = load(device, vmfbs["sync"], workload.func_name), load(device, vmfbs["async"],
                                                                               workload.func_name)
    calls: dict[str, Callable[[], object]] = {
        "invoke": bound_call(sync_fn, arrays),
        "fence.wait": fenced_call(async_fn, arrays, device, waiter=lambda fence: fence.wait()),
        "yielding poll": fenced_call(async_fn, arrays, device),
    }
    for mode, call in calls.items():
        out = call().get_as_ref(0).deref(rt.HalBufferView)
        got = rt.DeviceArray(device, out).to_host()
        if not np.allclose(got, reference, rtol=1e-3, atol=1e-3):
            return [f"{name}: the {mode} call's output differs from numpy's"]
    torch = torch_call(name, SHAPES[name], inputs, threads)
    if torch is not None:
        calls[f"PyTorch ({threads} threads)"] = torch
    times = time_modes(calls, rounds, round_s)
    return [f"### {workload.label}", "",
            "| call | median us | p90 us | p99 us | mean us | caller CPU us per call |",
            "| --- | --- | --- | --- | --- | --- |",
            *(times[mode].row(mode) for mode in calls), ""]


def main(argv: list[str] | None = None) -> int:
    keep_freed_memory()  # before any contender allocates (`ansor_bench/heap.py`)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default="GMM,softmax")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--round-s", type=float, default=0.4)
    parser.add_argument("--out", type=Path, default=Path("/tmp/caller_wait"))
    parser.add_argument("--docs", type=Path, default=None)
    args = parser.parse_args(argv)
    unknown = [op for op in args.ops.split(",") if op not in SHAPES]
    if unknown or args.threads < 2:
        print(f"caller_wait_report: choose --ops from {', '.join(SHAPES)} and --threads of 2 or more",
              file=sys.stderr)
        return 2
    import iree.runtime as rt

    target = resolve_target(detect_host(threads=args.threads))
    rt.flags.parse_flags(*target.runtime_flags())
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python tools/caller_wait_report.py " + " ".join(argv if argv is not None else sys.argv[1:])
    halt_poll = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
    lines = ["# The caller's wait at threads > 1", "",
             f"- Command: `{command}`", f"- Commit: {git_commit(ROOT)}",
             f"- Host: {cpu_model()}, {os.cpu_count()} logical CPUs, {platform.machine()}; IREE `cpu=host` is "
             f"`{target.resolved_cpu}`; `local-task` with {args.threads} workers"
             + (f"; guest halt polling {halt_poll.read_text().strip()} ns" if halt_poll.exists() else ""),
             f"- {args.rounds} alternated rounds of {args.round_s} s of back-to-back calls per mode.", ""]
    for op in args.ops.split(","):
        lines += report_op(op, args.threads, args.rounds, args.round_s, args.out)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.docs is not None:
        args.docs.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""IREE's per-call floor on each device the report times: a 16-float add, timed like the contenders.

An IREE program on `local-task` pays the task system on every call (the
workers' wake-up, the caller's wait); on `local-sync` it runs on the calling
thread and pays almost nothing. In the 2-thread table of a 2-vCPU guest that
floor was 11.3 us on `local-task` against 3.2 us on `local-sync`, while
PyTorch's 2-thread 128^3 matmul took 30 us in all: for an op that small the
floor, not the kernel, decides the ratio. So the report measures the floor in
the same run, timed alternately by the same scheme as the contenders, and
prints it beside the roofline, where a reader can tell the two limits apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ansor_bench.timing import time_alternately
from ansor_mlir.core.target import Target
from ansor_mlir.tuning.device_choice import ONE_THREAD

FUNCTION = "call_floor"
PROGRAM = """func.func @call_floor(%a: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<16xf32> {
  %r = arith.addf %a, %b : tensor<16xf32>
  return %r : tensor<16xf32>
}
"""

@dataclass(frozen=True)
class CallFloor:
    """The median per-call time of the tiny program on one IREE runtime device."""

    device: str
    workers: int  # 0: the calling thread
    median_s: float

    def text(self) -> str:
        where = f"{self.device} ({self.workers} workers)" if self.workers else self.device
        return f"{where} {self.median_s * 1e6:.1f} us"


def floor_devices(target: Target) -> tuple[str, ...]:
    """The devices the report's IREE programs may run on: the caller's thread, and the task system above 1."""
    return (ONE_THREAD,) if target.threads <= 1 else (ONE_THREAD, target.runtime_device())


def measure_call_floors(target: Target, out_dir: Path, rounds: int, min_round_s: float) -> tuple[CallFloor, ...]:
    """Build the tiny program for `target` and time it on each of its devices alternately; () when it cannot
    be built (the report then says nothing of a floor rather than a wrong one)."""
    from ansor_mlir.measure.vm_call import timed_call
    from ansor_mlir.mlir.iree_compiler import compile_vmfb
    from ansor_mlir.mlir.iree_module import CompiledModel

    vmfb = out_dir / "vmfb" / f"{FUNCTION}.vmfb"
    vmfb.parent.mkdir(parents=True, exist_ok=True)
    if not compile_vmfb(PROGRAM, target.compile_flags(), vmfb).ok:
        return ()
    inputs = [np.arange(16, dtype=np.float32), np.ones(16, dtype=np.float32)]
    devices = floor_devices(target)
    calls = {device: timed_call(CompiledModel(vmfb.read_bytes(), FUNCTION, device), inputs) for device in devices}
    timings = time_alternately(calls, rounds, min_round_s)
    return tuple(CallFloor(device, 0 if device == ONE_THREAD else target.threads, timings[device].median_s)
                 for device in devices)


def lowest(first: tuple[CallFloor, ...], second: tuple[CallFloor, ...]) -> tuple[CallFloor, ...]:
    """Per device, the run with the lower median: a floor is a minimum, and load only raises it."""
    by_device = {f.device: f for f in first}
    for f in second:
        if f.device not in by_device or f.median_s < by_device[f.device].median_s:
            by_device[f.device] = f
    return tuple(by_device.values())


def floor_text(floors: tuple[CallFloor, ...]) -> str:
    """One line for the report, or "" when nothing was measured."""
    return "; ".join(f.text() for f in floors)

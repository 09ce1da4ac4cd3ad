"""Time several compiled programs alternately in one run and report ratios.

On a shared 2-core machine absolute times drift; alternating the contenders
round by round and comparing medians keeps the ratios honest.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from ansor_mlir.measure.round_order import round_order
from ansor_mlir.measure.vm_call import placements, prepared_calls
from ansor_mlir.mlir.runtime_device import runtime_config
from ansor_mlir.mlir.vm_invoke import call_outputs


@dataclass(frozen=True)
class Contender:
    """An IREE program (`vmfb` and its `function`), or a library call (`call`, given the host arrays) timed
    against them: what a user would call instead (numpy's BLAS, PyTorch)."""

    name: str
    # The VM module: a file, or its bytes (a `BuiltProgram`'s).
    vmfb: Path | bytes | None = None
    function: str = ""
    call: Callable[..., object] | None = None


def load_function(vmfb: Path | bytes, function: str, device: str = "local-sync"):
    import iree.runtime as rt

    config = runtime_config(device)
    ctx = rt.SystemContext(config=config)
    data = vmfb if isinstance(vmfb, bytes) else vmfb.read_bytes()
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, data))
    return ctx.modules.module[function], config


def run_once(
    vmfb: Path | bytes, function: str, inputs: list[np.ndarray], device: str = "local-sync"
) -> list[np.ndarray]:
    fn, config = load_function(vmfb, function, device)
    outputs = call_outputs(fn, config.device, inputs)
    return [np.asarray(o.to_host()) for o in outputs]


def time_alternately(
    contenders: list[Contender],
    inputs: list[np.ndarray],
    rounds: int = 10,
    min_round_s: float = 0.05,
    device: str = "local-sync",
) -> dict[str, float]:
    """Median seconds per call of each contender, timed in interleaved rounds.

    All contenders run on one device, and each round gives all of them the
    same inputs, rotating over several placements in memory
    (`vm_call.placements`): a binary's time depends on where its operands
    sit, and a contender must not win by its buffers' addresses.
    """
    import iree.runtime as rt

    config = runtime_config(device)
    loaded = {}
    host = [np.ascontiguousarray(x) for x in inputs]
    rotation = placements(config.device, inputs)
    for c in contenders:
        if c.call is not None:
            c.call(*host)
            loaded[c.name] = [partial(c.call, *host)]
            continue
        ctx = rt.SystemContext(config=config)
        data = c.vmfb if isinstance(c.vmfb, bytes) else c.vmfb.read_bytes()
        ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, data))
        fn = ctx.modules.module[c.function]
        call_outputs(fn, config.device, [rt.asdevicearray(config.device, x) for x in inputs])
        loaded[c.name] = prepared_calls(fn, rotation, config.device)
    # Each contender's calls, one per placement: IREE programs through the VM directly (`vm_call`), host
    # callables on the host inputs (one).
    samples: dict[str, list[float]] = {c.name: [] for c in contenders}
    for round_index in range(rounds):
        for name, calls in round_order(list(loaded.items()), round_index):
            call = calls[round_index % len(calls)]
            deadline = time.perf_counter() + min_round_s
            while True:
                start = time.perf_counter()
                call()
                samples[name].append(time.perf_counter() - start)
                if time.perf_counter() >= deadline:
                    break
    return {name: statistics.median(times) for name, times in samples.items()}

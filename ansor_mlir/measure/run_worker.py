"""The local runner's timing worker: a child process that loads a VM module, checks it and times it.

It lives in its own process so that a crashing or hanging kernel kills only
the worker; the runner restarts it and records the failure. Timing is the
host clock around each call: a CPU device's call returns when its work is done.

Where the operands sit in memory moves a kernel's time (cache-set conflicts
and 4K aliasing of power-of-two strides depend on the buffers' addresses;
measured: docs/reports/measurement_fidelity.md). A program timed on one
placement can win or lose by
luck; so calls cover several placements of the inputs (`vm_call.PLACEMENTS`),
one block of consecutive calls each (`timed_in_blocks`), and alternated
comparisons give every program of a round the same freshly placed inputs.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

from ansor_mlir.measure.arrays import is_floating, save_array  # also teaches np.load the ml_dtypes types
from ansor_mlir.measure.round_order import round_order
from ansor_mlir.measure.vm_call import placements, prepared_calls
from ansor_mlir.mlir.runtime_device import runtime_config
from ansor_mlir.mlir.vm_invoke import call_outputs

# A call this slow is timed with no extra warm-up and fewer repeats.
SLOW_CALL_S = 0.5


def tolerance(dtype: np.dtype) -> float:
    """Relative tolerance by element type (reductions reassociate)."""
    if is_floating(dtype) and dtype.itemsize == 1:  # the f8 variants: 2-3 mantissa bits
        return 0.25
    if dtype in (np.float16,) or dtype.name == "bfloat16":
        return 3e-2
    if is_floating(dtype):
        return 1e-3
    return 0.0


def compare(output: np.ndarray, reference: np.ndarray) -> tuple[bool, float]:
    if output.shape != reference.shape:
        return False, float("inf")
    if not is_floating(reference.dtype):
        diff = np.abs(output.astype(np.int64) - reference.astype(np.int64))
        return bool(np.all(diff == 0)), float(diff.max(initial=0))
    out = output.astype(np.float64)
    ref = reference.astype(np.float64)
    if not np.array_equal(np.isnan(out), np.isnan(ref)):
        return False, float("nan")
    mask = ~np.isnan(ref)
    diff = np.abs(out[mask] - ref[mask])
    max_err = float(diff.max(initial=0.0))
    scale = max(1.0, float(np.abs(ref[mask]).max(initial=0.0)))
    return max_err <= tolerance(reference.dtype) * scale, max_err


def load_function(config, vmfb_path: str, request: dict):
    """The requested function of the module at `vmfb_path`, in a context that serves the request's weights."""
    import iree.runtime as rt

    ctx = rt.SystemContext(config=config)
    if request.get("parameters"):
        index = rt.ParameterIndex()
        index.load(request["parameters"])
        provider = index.create_provider(scope=request.get("parameter_scope", "model"))
        ctx.add_vm_module(rt.create_io_parameters_module(ctx.instance, provider))
    with open(vmfb_path, "rb") as f:
        ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, f.read()))
    return ctx.modules.module[request["function"]]


def timed_in_blocks(placed: list[Callable[[], object]], min_repeats: int, max_repeats: int, min_time_s: float,
                    warm: bool = True) -> list[float]:
    """Seconds per call, each placement of the inputs timed in one block of consecutive calls (after an untimed
    call on it when `warm`), the blocks sharing `min_time_s`, `min_repeats` and `max_repeats` out.

    Within a block the inputs stay where the last call left them, warm in cache as a task's are in its program,
    where the producer has just written them; rotating placements on every call instead read a memory-bound
    task's inputs from beyond L2 (the softmax's 786 KB, times 4 placements) and ranked its candidates by a
    proxy of the program (`vm_call.PlacedCalls` does the same for the benchmark's rounds).
    """
    blocks = len(placed)
    per_block = -(-max(min_repeats, blocks) // blocks)
    most = max(per_block, max_repeats // blocks)
    times: list[float] = []
    for call in placed:
        if warm:
            call()
        block: list[float] = []
        deadline = time.perf_counter() + min_time_s / blocks
        while len(block) < per_block or (time.perf_counter() < deadline and len(block) < most):
            start = time.perf_counter()
            call()
            block.append(time.perf_counter() - start)
        times.extend(block)
    return times


def time_module(request: dict) -> dict:
    import iree.runtime as rt

    config = runtime_config(request["device"])
    fn = load_function(config, request["vmfb"], request)
    inputs = [np.load(path) for path in request["inputs"]]
    args = [rt.asdevicearray(config.device, x) for x in inputs]
    started = time.perf_counter()
    outputs = call_outputs(fn, config.device, args)
    first_s = time.perf_counter() - started
    host = [np.asarray(o.to_host()) for o in outputs]
    response: dict = {"max_abs_error": 0.0}
    if request.get("references"):
        for out, ref_path in zip(host, request["references"], strict=True):
            ok, err = compare(out, np.load(ref_path))
            response["max_abs_error"] = max(response["max_abs_error"], err)
            if not ok:
                response["wrong"] = True
                return response
    if request.get("save_outputs"):
        response["outputs"] = [os.path.join(request["save_outputs"], f"out{i}.npy") for i in range(len(host))]
        for out, path in zip(host, response["outputs"], strict=True):
            save_array(path, out)
    warmup, min_repeats = request.get("warmup", 2), request["min_repeats"]
    if first_s > SLOW_CALL_S:
        # Seconds per call: the checked call warmed everything up, and a few calls are plenty.
        warmup, min_repeats = 0, min(min_repeats, 2)
    placed = prepared_calls(fn, [args, *placements(config.device, inputs)[1:]], config.device)
    for i in range(warmup):
        placed[i % len(placed)]()
    # A block's untimed first call only where calls are short beside the block's share of the time.
    times = timed_in_blocks(placed, min_repeats, request["max_repeats"], request["min_time_s"],
                            warm=warmup > 0 and first_s * len(placed) < request["min_time_s"])
    response["times"] = times
    response["median"] = statistics.median(times)
    q = statistics.quantiles(times, n=4) if len(times) >= 4 else [min(times), 0, max(times)]
    response["spread"] = q[2] - q[0]
    return response


def compare_modules(request: dict) -> dict:
    """Per program, the median of each round's calls, rounds alternating between programs; outputs checked
    against the first program's."""
    import iree.runtime as rt

    inputs = [np.load(path) for path in request["inputs"]]
    # One device per runtime device named (`devices`: one per program, else `device` for all): the programs
    # of a device share its freshly placed inputs, round by round.
    names = request.get("devices") or [request["device"]] * len(request["compare"])
    configs = {name: runtime_config(name) for name in dict.fromkeys(names)}
    loaded, outputs = [], []
    for path, name in zip(request["compare"], names, strict=True):
        config = configs[name]
        fn = load_function(config, path, request)
        results = call_outputs(fn, config.device, [rt.asdevicearray(config.device, x) for x in inputs])
        outputs.append([np.asarray(o.to_host()) for o in results])
        loaded.append(fn)
    wrong = [i for i, outs in enumerate(outputs) if i and not all(
        compare(out, ref)[0] for out, ref in zip(outs, outputs[0], strict=True))]
    samples: list[list[float]] = [[] for _ in loaded]
    rotations = {name: placements(config.device, inputs) for name, config in configs.items()}
    calls = [prepared_calls(fn, rotations[name], configs[name].device) for fn, name in zip(loaded, names, strict=True)]
    for round_index in range(request["rounds"]):
        for i, program_calls in round_order(list(enumerate(calls)), round_index):
            call = program_calls[round_index % len(program_calls)]
            times = []
            deadline = time.perf_counter() + request["min_round_s"]
            while not times or time.perf_counter() < deadline:
                start = time.perf_counter()
                call()
                times.append(time.perf_counter() - start)
            samples[i].append(statistics.median(times))
    return {"samples": samples, "wrong": wrong}


def serve(runtime_flags: list[str]) -> None:
    """Answer JSON-line timing requests on stdin until it closes.

    `runtime_flags` (`Target.runtime_flags`: the task system's worker count)
    configure IREE's runtime for the whole process, so they are parsed before
    any device exists.
    """
    if runtime_flags:
        import iree.runtime as rt

        rt.flags.parse_flags(*runtime_flags)
    for line in sys.stdin:
        try:
            request = json.loads(line)
            response = compare_modules(request) if "compare" in request else time_module(request)
        except Exception as exc:  # a runtime failure of the candidate, reported as data
            response = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        sys.stdout.write(json.dumps(response) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve(sys.argv[1:])

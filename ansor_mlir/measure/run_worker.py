"""The local runner's timing worker: a child process that loads a VM module, checks it and times it.

It lives in its own process so that a crashing or hanging kernel kills only
the worker; the runner restarts it and records the failure. Timing is the
host clock around each call: a CPU device's call returns when its work is done.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

import numpy as np

# A call this slow is timed with no extra warm-up and fewer repeats.
SLOW_CALL_S = 0.5


def tolerance(dtype: np.dtype) -> float:
    """Relative tolerance by element type (reductions reassociate)."""
    if dtype in (np.float16,) or dtype.name == "bfloat16":
        return 3e-2
    if np.issubdtype(dtype, np.floating):
        return 1e-3
    return 0.0


def compare(output: np.ndarray, reference: np.ndarray) -> tuple[bool, float]:
    if output.shape != reference.shape:
        return False, float("inf")
    if not np.issubdtype(reference.dtype, np.floating):
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


def time_module(request: dict) -> dict:
    import iree.runtime as rt

    config = rt.Config(request["device"])
    ctx = rt.SystemContext(config=config)
    with open(request["vmfb"], "rb") as f:
        module = rt.VmModule.copy_buffer(ctx.instance, f.read())
    ctx.add_vm_module(module)
    fn = ctx.modules.module[request["function"]]
    inputs = [np.load(path) for path in request["inputs"]]
    args = [rt.asdevicearray(config.device, x) for x in inputs]
    started = time.perf_counter()
    result = fn(*args)
    first_s = time.perf_counter() - started
    outputs = result if isinstance(result, tuple) else (result,)
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
            np.save(path, out)
    warmup, min_repeats = request.get("warmup", 2), request["min_repeats"]
    if first_s > SLOW_CALL_S:
        # Seconds per call: the checked call warmed everything up, and a few calls are plenty.
        warmup, min_repeats = 0, min(min_repeats, 2)
    for _ in range(warmup):
        fn(*args)
    times = []
    deadline = time.perf_counter() + request["min_time_s"]
    while len(times) < min_repeats or (
        time.perf_counter() < deadline and len(times) < request["max_repeats"]
    ):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
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
    loaded, outputs = [], []
    for path in request["compare"]:
        config = rt.Config(request["device"])
        ctx = rt.SystemContext(config=config)
        with open(path, "rb") as f:
            ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, f.read()))
        fn = ctx.modules.module[request["function"]]
        args = [rt.asdevicearray(config.device, x) for x in inputs]
        result = fn(*args)
        results = result if isinstance(result, tuple) else (result,)
        outputs.append([np.asarray(o.to_host()) for o in results])
        loaded.append((fn, args))
    wrong = [i for i, outs in enumerate(outputs) if i and not all(
        compare(out, ref)[0] for out, ref in zip(outs, outputs[0], strict=True))]
    samples: list[list[float]] = [[] for _ in loaded]
    for _ in range(request["rounds"]):
        for i, (fn, args) in enumerate(loaded):
            times = []
            deadline = time.perf_counter() + request["min_round_s"]
            while not times or time.perf_counter() < deadline:
                start = time.perf_counter()
                fn(*args)
                times.append(time.perf_counter() - start)
            samples[i].append(statistics.median(times))
    return {"samples": samples, "wrong": wrong}


def serve() -> None:
    """Answer JSON-line timing requests on stdin until it closes."""
    for line in sys.stdin:
        try:
            request = json.loads(line)
            response = compare_modules(request) if "compare" in request else time_module(request)
        except Exception as exc:  # a runtime failure of the candidate, reported as data
            response = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        sys.stdout.write(json.dumps(response) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()

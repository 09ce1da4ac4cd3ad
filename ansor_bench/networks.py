"""Whole networks end to end: tuned by ansor-mlir against IREE's default, onnxruntime and PyTorch eager.

One `NetworkRun` is a model at a thread count: the model is exported to ONNX
once (onnxruntime runs that file, ansor-mlir imports it), tuned with a total
budget shared out by the task scheduler, built with the log and without it,
and the four contenders are timed alternately in one process on the same
input, each output checked against PyTorch's.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ansor_bench.timing import mismatch, time_alternately
from ansor_mlir.core.target import Target
from ansor_mlir.frontend.model_source import ModelSource
from ansor_mlir.frontend.program_rewrites import DEFAULT_REWRITES

CONTENDERS = ("tuned", "iree_default", "onnxruntime", "pytorch")


@dataclass(frozen=True)
class NetworkResult:
    """Medians (ms) per contender, what was tuned, and any output mismatch against PyTorch."""

    model: str
    threads: int
    tasks: int
    trials: int
    tune_s: float
    median_ms: dict[str, float]
    mismatches: dict[str, str]

    def speedup(self, over: str) -> float:
        return self.median_ms[over] / self.median_ms["tuned"]

    def to_json(self) -> dict:
        return asdict(self)


def export(reference: str, out: Path) -> Path:
    """The ONNX file of `file.py:factory` (exported once, reused by later runs)."""
    from export_onnx import export_onnx

    if not out.exists():
        export_onnx(reference, out)
    return out


def pytorch_reference(reference: str):
    """The module and its example inputs, seeded as the factory seeds them."""
    from ansor_mlir.frontend.torch_import import load_factory

    return load_factory(reference)


def tune_network(source: ModelSource, target: Target, trials: int, log: Path, seed: int = 0, *,
                 rewrites: str = DEFAULT_REWRITES, time_budget: str | None = None) -> float:
    """Tune the imported model with `trials` in all (resumes from `log`), after `rewrites`, within
    `time_budget` where one is given; returns the seconds it took."""
    from ansor_mlir import api

    start = time.perf_counter()
    api.tune(source, target, trials=trials, log=log, seed=seed, progress=False, rewrites=rewrites,
             time_budget=time_budget)
    return time.perf_counter() - start


def measure_network(name: str, reference: str, onnx_path: Path, source: ModelSource, target: Target, log: Path,
                    tasks: int, trials: int, tune_s: float, rounds: int = 10, rewrites: str = DEFAULT_REWRITES,
                    ) -> NetworkResult:
    """Time the four contenders alternately at the target's threads; outputs checked against PyTorch eager.

    `source` is `onnx_path` imported (onnxruntime runs the file itself)."""
    import onnxruntime as ort
    import torch

    import ansor_mlir

    threads = target.threads
    module, inputs = pytorch_reference(reference)
    arrays = [x.numpy() for x in inputs]
    tuned = ansor_mlir.compile(source, target, log, rewrites=rewrites)
    # IREE's default: the model as imported, built by IREE alone (no program rewrites of ours).
    default = ansor_mlir.compile(source, target, None, rewrites="none")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    feeds = {i.name: a for i, a in zip(session.get_inputs(), arrays, strict=True)}
    torch.set_num_threads(threads)

    def eager():
        with torch.inference_mode():
            return module(*inputs)

    calls = {
        "tuned": lambda: tuned(*arrays),
        "iree_default": lambda: default(*arrays),
        "onnxruntime": lambda: session.run(None, feeds),
        "pytorch": eager,
    }
    expected = [np.asarray(o) for o in _as_list(eager())]
    mismatches = {}
    for contender in ("tuned", "iree_default", "onnxruntime"):
        why = mismatch([np.asarray(o) for o in _as_list(calls[contender]())], expected)
        if why:
            mismatches[contender] = why
    timings = time_alternately(calls, rounds=rounds, min_round_s=0.2)
    return NetworkResult(name, threads, tasks, trials, tune_s, {k: t.median_s * 1e3 for k, t in timings.items()},
                         mismatches)


def _as_list(outputs) -> list:
    import torch

    if isinstance(outputs, (tuple, list)):
        return [o.detach().numpy() if isinstance(o, torch.Tensor) else o for o in outputs]
    return [outputs.detach().numpy() if isinstance(outputs, torch.Tensor) else outputs]


def markdown(results: list[NetworkResult]) -> str:
    """The table: medians, and the tuned program's speedup over each contender."""
    lines = [
        "| model | threads | tasks | trials | tuning (min) | tuned (ms) | IREE default (ms) | onnxruntime (ms) "
        "| PyTorch (ms) | vs IREE default | vs onnxruntime | vs PyTorch | outputs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        ms = r.median_ms
        checked = "; ".join(f"{k}: {v}" for k, v in r.mismatches.items()) or "all equal to PyTorch's"
        lines.append(
            f"| {r.model} | {r.threads} | {r.tasks} | {r.trials} | {r.tune_s / 60:.1f} | {ms['tuned']:.2f} "
            f"| {ms['iree_default']:.2f} | {ms['onnxruntime']:.2f} | {ms['pytorch']:.2f} "
            f"| {r.speedup('iree_default'):.2f}x | {r.speedup('onnxruntime'):.2f}x | {r.speedup('pytorch'):.2f}x "
            f"| {checked} |"
        )
    return "\n".join(lines) + "\n"

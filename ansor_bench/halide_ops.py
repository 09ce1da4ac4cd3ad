"""Suite entries as Halide pipelines, scheduled by Halide's Adams2019 autoscheduler (optional extra).

The Ansor paper compares against Halide's auto-scheduler. `halide==21.0.0` from PyPI ships its plugins in
`halide/lib64`. Adams2019 ranks candidate schedules with its learned cost model (the weights built into the
plugin) and measures none, so its whole search is one `apply_autoscheduler` call: those seconds are what the
report sets against the tuners' minutes.

Halide's dimension 0 is the innermost, and `hl.Buffer(array)` reverses a numpy array's axes over the same
memory, so a channels-last (N, H, W, C) array is the Halide buffer (C, W, H, N). The expressions index in that
order and compute exactly the workloads' functions, zero padding included. Every buffer's bounds and strides
are fixed to the workload's shape, as the other contenders compile for static shapes. With constant strides
Halide proves vector accesses aligned and emits aligned loads, trusting each host pointer to be aligned as its
own allocations are; numpy's small arrays are only 16-byte aligned (an aligned 32-byte AVX load from one
faults), so inputs and output are copied to `ALIGN_BYTES`-aligned arrays first.

Halide's JIT runtime sizes its thread pool from `HL_NUM_THREADS` at its first parallel call, so one process
runs Halide at one thread count.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import halide as hl
import numpy as np

AUTOSCHEDULER = "Adams2019"
PLUGIN_FILE = "libautoschedule_adams2019.so"
ALIGN_BYTES = 128  # the largest of Halide's runtime malloc alignments (32, 64 or 128 by target)

Args = dict[str, int]
Shape = tuple[int, ...]


@dataclass(frozen=True)
class HalideOp:
    """An autoscheduled, JIT-compiled Halide pipeline bound to its inputs, and what preparing it cost."""

    call: Callable[[], object]
    fetch: Callable[[], list[np.ndarray]]
    autoschedule_s: float
    compile_s: float
    target: str
    schedule: str


def plugin_path() -> Path:
    """Where the PyPI wheel keeps the Adams2019 plugin."""
    return Path(hl.__file__).parent / "lib64" / PLUGIN_FILE


@cache
def load_adams2019(path: Path | None = None) -> Path:
    """Register the Adams2019 autoscheduler with Halide (once per process); FileNotFoundError names the fix."""
    path = path or plugin_path()
    if not path.is_file():
        raise FileNotFoundError(f"Halide's Adams2019 plugin is missing: no {path} (pip install halide==21.0.0)")
    hl.load_plugin(str(path))
    return path


# --------------------------------------------------------------------------- expressions


def _vars(*names: str) -> list[hl.Var]:
    return [hl.Var(n) for n in names]


def _zero_padded(x: hl.ImageParam, p: int, spatial: Sequence[int], shape: Shape) -> hl.Func | hl.ImageParam:
    """`x` zero-padded by `p` on its `spatial` dims (Halide order), as `tensor.pad` does: the padded tensor's
    index i reads x at i - p. `x` itself when p == 0."""
    if p == 0:
        return x
    extents = tuple(reversed(shape))
    bounds = [hl.Range(0, extents[d]) if d in spatial else hl.Range() for d in range(len(extents))]
    zero_outside = hl.BoundaryConditions.constant_exterior(x, 0.0, bounds)
    at = _vars(*(f"d{d}" for d in range(len(extents))))
    padded = hl.Func(f"{x.name()}_padded")
    padded[at] = zero_outside[[v - p if d in spatial else v for d, v in enumerate(at)]]
    return padded


def _gmm(a: Args, ins: list[hl.ImageParam]) -> hl.Func:
    """out(b, i, j) = sum_k x(b, i, k) * y(b, k, j)."""
    x, y = ins
    j, i, b = _vars("j", "i", "b")
    k = hl.RDom([hl.Range(0, a["K"])], "k")
    out = hl.Func("gmm")
    out[j, i, b] = 0.0
    out[j, i, b] += x[k.x, i, b] * y[j, k.x, b]
    return out


def _c2d(a: Args, ins: list[hl.ImageParam]) -> hl.Func:
    """NHWC conv with an HWCF filter: the filter is (co, ci, kw, kh) in Halide order."""
    x, w = ins
    s = a["s"]
    xp = _zero_padded(x, a["p"], (1, 2), (a["N"], a["H"], a["W"], a["CI"]))
    f, ow, oh, n = _vars("f", "ow", "oh", "n")
    r = hl.RDom([hl.Range(0, a["CI"]), hl.Range(0, a["k"]), hl.Range(0, a["k"])], "r")
    out = hl.Func("c2d")
    out[f, ow, oh, n] = 0.0
    out[f, ow, oh, n] += xp[r.x, ow * s + r.y, oh * s + r.z, n] * w[f, r.x, r.y, r.z]
    return out


def _dep(a: Args, ins: list[hl.ImageParam]) -> hl.Func:
    """NHWC depthwise conv with a (k, k, C) filter: (c, kw, kh) in Halide order."""
    x, w = ins
    s = a["s"]
    xp = _zero_padded(x, a["p"], (1, 2), (a["N"], a["H"], a["W"], a["C"]))
    c, ow, oh, n = _vars("c", "ow", "oh", "n")
    r = hl.RDom([hl.Range(0, a["k"]), hl.Range(0, a["k"])], "r")
    out = hl.Func("dep")
    out[c, ow, oh, n] = 0.0
    out[c, ow, oh, n] += xp[c, ow * s + r.x, oh * s + r.y, n] * w[c, r.x, r.y]
    return out


def _nrm(a: Args, ins: list[hl.ImageParam]) -> hl.Func:
    """out(b) = sqrt(sum over m, n of x(b, m, n)^2)."""
    (x,) = ins
    (b,) = _vars("b")
    r = hl.RDom([hl.Range(0, a["N"]), hl.Range(0, a["M"])], "r")
    sumsq = hl.Func("sumsq")
    sumsq[b] = 0.0
    sumsq[b] += x[r.x, r.y, b] * x[r.x, r.y, b]
    out = hl.Func("nrm")
    out[b] = hl.sqrt(sumsq[b])
    return out


def _softmax(a: Args, ins: list[hl.ImageParam]) -> hl.Func:
    """Last-dim softmax in the workload's three steps: row max, sum of exp, divide."""
    (x,) = ins
    c, row = _vars("c", "row")
    r = hl.RDom([hl.Range(0, a["cols"])], "r")
    top = hl.Func("row_max")
    top[row] = hl.maximum(x[r.x, row])
    total = hl.Func("row_sum")
    total[row] = hl.sum(hl.exp(x[r.x, row] - top[row]))
    out = hl.Func("softmax")
    out[c, row] = hl.exp(x[c, row] - top[row]) / total[row]
    return out


EXPRESSIONS: dict[str, Callable[[Args, list[hl.ImageParam]], hl.Func]] = {
    "GMM": _gmm,
    "C2D": _c2d,
    "DEP": _dep,
    "NRM": _nrm,
    "softmax": _softmax,
}


# --------------------------------------------------------------------------- schedule, compile, bind


def aligned(x: np.ndarray, align: int = ALIGN_BYTES) -> np.ndarray:
    """A C-contiguous float32 copy of `x` whose data starts on an `align`-byte boundary."""
    raw = np.empty(x.size * 4 + align, dtype=np.uint8)
    start = -raw.ctypes.data % align
    out = raw[start:start + x.size * 4].view(np.float32).reshape(x.shape)
    out[...] = x
    return out


def _fix_layout(dim: Callable[[int], hl.Dimension], shape: Shape) -> list[hl.Range]:
    """Constant bounds and dense row-major strides for a buffer of numpy `shape`; its ranges in Halide order."""
    stride = 1
    ranges = []
    for d, extent in enumerate(reversed(shape)):
        dim(d).set_bounds(0, extent).set_stride(stride)
        ranges.append(hl.Range(0, extent))
        stride *= extent
    return ranges


def halide_op(name: str, args: Args, inputs: list[np.ndarray], out_shape: Shape, threads: int = 1) -> HalideOp:
    """Express workload `name` (a key of `EXPRESSIONS`) in Halide, autoschedule it with Adams2019 for `threads`
    cores, JIT-compile it for this host and bind it to `inputs`."""
    load_adams2019()
    os.environ["HL_NUM_THREADS"] = str(threads)
    arrays = [aligned(x) for x in inputs]
    params = [hl.ImageParam(hl.Float(32), x.ndim, f"in{i}") for i, x in enumerate(arrays)]
    for param, x in zip(params, arrays, strict=True):
        param.set_estimates(_fix_layout(param.dim, x.shape))
    out = EXPRESSIONS[name](args, params)
    out.set_estimates(_fix_layout(out.output_buffer().dim, out_shape))
    pipeline = hl.Pipeline(out)
    target = hl.get_jit_target_from_environment()
    start = time.perf_counter()
    results = pipeline.apply_autoscheduler(target, hl.AutoschedulerParams(AUTOSCHEDULER,
                                                                          {"parallelism": str(threads)}))
    scheduled = time.perf_counter()
    run = pipeline.compile_to_callable(params, target)
    compile_s = time.perf_counter() - scheduled
    result = aligned(np.zeros(out_shape, dtype=np.float32))
    buffers = [*(hl.Buffer(x) for x in arrays), hl.Buffer(result)]

    def call() -> None:
        run(*buffers)

    def fetch() -> list[np.ndarray]:
        call()
        return [result.copy()]

    return HalideOp(call, fetch, scheduled - start, compile_s, str(target), results.schedule_source)

"""Each suite entry as a TVM tensor expression, tuned by TVM MetaSchedule (optional extra).

Pins that work here: `apache-tvm==0.27.0.post1` with `apache-tvm-ffi==0.1.14.post1`.
MetaSchedule lives in `tvm.s_tir.meta_schedule` in 0.27. Two traps, handled below:
- the target must be a JSON-style dict with an explicit `mcpu` (LLVM's name for
  this host); `-mcpu=native` silently falls back to a generic CPU;
- the stock builder imports `tvm.s_tir.tensor_intrin` in every build worker,
  which takes 25-45 s here and exceeds the build timeout, so every candidate
  fails. `build_without_intrinsics` is the same build without that import,
  registered in each worker by the pool initializer.

The expressions use the workloads' own layouts (channels-last, the same
filters), so TVM computes exactly what IREE does, padding included.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BUILD_FUNC = "ansor_bench.tvm_build"


@dataclass(frozen=True)
class TvmOp:
    """A tuned, compiled TVM function bound to its inputs, and its tuning curve."""

    call: Callable[[], object]
    fetch: Callable[[], list[np.ndarray]]
    curve: tuple[float, ...]
    trials: int


def build_without_intrinsics(mod, target, _params):
    """MetaSchedule's default build, minus the slow tensor-intrinsic import."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def register_build() -> None:
    """Pool initializer: make `BUILD_FUNC` known in a MetaSchedule build worker."""
    import tvm

    tvm.register_global_func(BUILD_FUNC, build_without_intrinsics, override=True)


def host_target(threads: int = 1):
    """An LLVM target for this host with the CPU named explicitly (see module docstring)."""
    import tvm
    from tvm.target import codegen

    return tvm.target.Target({"kind": "llvm", "mcpu": codegen.llvm_get_system_cpu(), "num-cores": threads})


# --------------------------------------------------------------------------- expressions


def _pad(x, pads: list[int]):
    from tvm import topi

    return topi.nn.pad(x, pads, pads) if any(pads) else x


def _conv_nd(te, x, w, s: int, p: int, d: int, name: str = "conv"):
    """Channels-last N-d conv with filter (k..., CI, CO), as the workloads define it."""
    rank = len(x.shape) - 2
    xp = _pad(x, [0] + [p] * rank + [0])
    ks = [int(v) for v in w.shape[:rank]]
    ci, co = int(w.shape[rank]), int(w.shape[rank + 1])
    outs = [(int(xp.shape[1 + i]) - d * (ks[i] - 1) - 1) // s + 1 for i in range(rank)]
    rk = [te.reduce_axis((0, k), f"r{i}") for i, k in enumerate(ks)]
    rc = te.reduce_axis((0, ci), "rc")

    def body(n, *rest):
        sp, f = rest[:rank], rest[rank]
        taps = [sp[i] * s + rk[i] * d for i in range(rank)]
        return te.sum(xp[(n, *taps, rc)] * w[(*rk, rc, f)], axis=[*rk, rc])

    return te.compute((int(x.shape[0]), *outs, co), body, name=name)


def _expression(name: str, a: dict[str, int], shapes: list[tuple[int, ...]]):
    """Placeholders and output tensors of one workload."""
    from tvm import te, topi

    ph = [te.placeholder(s, "float32", f"in{i}") for i, s in enumerate(shapes)]
    if name == "GMM":
        k = te.reduce_axis((0, a["K"]), "k")
        x, y = ph
        out = te.compute((a["B"], a["N"], a["M"]), lambda b, i, j: te.sum(x[b, i, k] * y[b, k, j], axis=k))
    elif name in ("C1D", "C2D", "C3D", "DIL"):
        out = _conv_nd(te, ph[0], ph[1], a["s"], a["p"], a.get("dilation", 1))
    elif name == "ConvLayer":
        conv = _conv_nd(te, ph[0], ph[1], a["s"], a["p"], 1)
        bias, scale, shift = ph[2:]
        out = te.compute(conv.shape, lambda n, h, w, c: te.max(
            (conv[n, h, w, c] + bias[c]) * scale[c] + shift[c], te.const(0.0, "float32")))
    elif name == "GRP":
        x, w = ph
        g, k, s, d = a["groups"], a["k"], a["s"], a["dilation"]
        cig, cog = a["CI"] // g, a["CO"] // g
        xp = _pad(x, [0, a["p"], a["p"], 0])
        oh, ow = ((int(xp.shape[i]) - d * (k - 1) - 1) // s + 1 for i in (1, 2))
        rh, rw, rc = te.reduce_axis((0, k), "rh"), te.reduce_axis((0, k), "rw"), te.reduce_axis((0, cig), "rc")
        out = te.compute((a["N"], oh, ow, a["CO"]), lambda n, h, v, c: te.sum(
            xp[n, h * s + rh * d, v * s + rw * d, (c // cog) * cig + rc] * w[c // cog, c % cog, rh, rw, rc],
            axis=[rh, rw, rc]))
    elif name == "DEP":
        x, w = ph
        k, s = a["k"], a["s"]
        xp = _pad(x, [0, a["p"], a["p"], 0])
        oh, ow = ((int(xp.shape[i]) - k) // s + 1 for i in (1, 2))
        rh, rw = te.reduce_axis((0, k), "rh"), te.reduce_axis((0, k), "rw")
        out = te.compute((a["N"], oh, ow, a["C"]), lambda n, h, v, c: te.sum(
            xp[n, h * s + rh, v * s + rw, c] * w[rh, rw, c], axis=[rh, rw]))
    elif name == "T2D":
        x, w = ph
        k, s, p = a["k"], a["s"], a["p"]
        q = k - 1 - p
        z = _pad(topi.nn.dilate(x, (1, s, s, 1)), [0, q, q, 0])
        flipped = te.compute(w.shape, lambda i, j, c, f: w[k - 1 - i, k - 1 - j, c, f], name="flip")
        out = _conv_nd(te, z, flipped, 1, 0, 1)
    elif name == "CAP":
        x, w = ph
        k, s = a["k"], a["s"]
        cap = int(x.shape[3])
        xp = _pad(x, [0, a["p"], a["p"], 0, 0, 0])
        oh, ow = ((int(xp.shape[i]) - k) // s + 1 for i in (1, 2))
        rh, rw = te.reduce_axis((0, k), "rh"), te.reduce_axis((0, k), "rw")
        rcap, rc = te.reduce_axis((0, cap), "rcap"), te.reduce_axis((0, a["CI"]), "rc")
        out = te.compute((a["N"], oh, ow, cap, cap, a["CO"]), lambda n, h, v, i, j, f: te.sum(
            xp[n, h * s + rh, v * s + rw, i, rcap, rc] * w[rh, rw, rcap, j, rc, f], axis=[rh, rw, rcap, rc]))
    elif name == "NRM":
        (x,) = ph
        rm, rn = te.reduce_axis((0, a["M"]), "rm"), te.reduce_axis((0, a["N"]), "rn")
        sq = te.compute((a["B"],), lambda b: te.sum(x[b, rm, rn] * x[b, rm, rn], axis=[rm, rn]), name="sumsq")
        out = te.compute((a["B"],), lambda b: te.sqrt(sq[b]), name="norm")
    elif name == "TBS":
        q, kk = ph
        rd = te.reduce_axis((0, a["n_dim"]), "rd")
        b, s, h = a["batch"], a["seq_len"], a["n_head"]
        out = te.compute((b, h, s, s), lambda n, m, i, j: te.sum(q[n, i, m, rd] * kk[n, j, m, rd], axis=rd))
    elif name == "softmax":
        out = topi.nn.softmax(ph[0], axis=-1)
    else:
        raise KeyError(name)
    return ph, out


# --------------------------------------------------------------------------- tuning


def tuning_curve(work_dir: Path) -> tuple[float, ...]:
    """Best mean run time so far after each measured trial, from MetaSchedule's JSON database."""
    path = work_dir / "database_tuning_record.json"
    if not path.exists():
        return ()
    best, curve = float("inf"), []
    for line in path.read_text().splitlines():
        run_secs = json.loads(line)[1][1]
        if run_secs:
            best = min(best, float(np.mean(run_secs)))
        curve.append(best)
    return tuple(curve)


def tvm_op(
    name: str, args: dict[str, int], inputs: list[np.ndarray], out_shapes: list[tuple[int, ...]],
    trials: int, work_dir: Path, seed: int = 0, threads: int = 1,
) -> TvmOp:
    """Tune one workload with MetaSchedule (`trials` measured candidates), compile the best, bind inputs."""
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    placeholders, out = _expression(name, args, [x.shape for x in inputs])
    func = te.create_prim_func([*placeholders, out])
    target = host_target(threads)
    builder = ms.builder.LocalBuilder(f_build=BUILD_FUNC, initializer=register_build, timeout_sec=120)
    database = ms.tune_tir(func, target, str(work_dir), max_trials_global=trials,
                           num_trials_per_iter=min(trials, 16), builder=builder, seed=seed,
                           num_tuning_cores=threads)
    schedule = ms.tir_integration.compile_tir(database, func, target)
    if schedule is None:
        raise RuntimeError(f"MetaSchedule found no valid schedule in {trials} trials")
    lib = tvm.compile(schedule.mod, target=target)
    device = tvm.cpu()
    ins = [tvm.runtime.tensor(x, device) for x in inputs]
    outs = [tvm.runtime.empty(s, "float32", device) for s in out_shapes]
    main = lib["main"]

    def call() -> None:
        main(*ins, *outs)

    def fetch() -> list[np.ndarray]:
        call()
        return [o.numpy() for o in outs]

    curve = tuning_curve(work_dir)
    return TvmOp(call, fetch, curve, len(curve))

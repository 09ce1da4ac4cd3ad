"""The Ansor paper benchmark suite as linalg-on-tensors MLIR, for any shape.

Every entry of `ansor_paper_suite.json` (next to this module) (operators, subgraphs, plus a
softmax we add) becomes one static-shaped f32 `func.func` named after it, and
an independent numpy reference to check IREE's output against. Shapes are
rows of the json; `make_workload` takes any other row of the same arity so
tests can use small, quickly compiled instances of the very same generator.

Conventions:
- Padding is materialised with `tensor.pad` (zero) on the input, so the
  convolution op itself sees the padded tensor, as in the paper's TVM code.
- Layouts: activations channels-last (NLC, NHWC, NDHWC); filters HWCF-style
  (spatial..., CI, CO), except GRP (`G, CO/G, k, k, CI/G`, the layout of
  `linalg.conv_2d_nhwgc_gfhwc`), DEP (`k, k, C`) and CAP (`k, k, cap, cap, CI, CO`).
- `flops` counts useful work: 2 per multiply-accumulate of a conv/GEMM (for
  T2D, of the stride-1 conv over the zero-inserted input, TVM's convention),
  plus one per elementwise epilogue op per output (ConvLayer: bias add, bn
  multiply, bn add, relu = 4). NRM counts 2 per input element (square, add);
  softmax 5 per element (max, subtract, exp, sum, divide).
- `min_bytes` is compulsory traffic: every input read once, every output
  written once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from math import prod

import numpy as np

from ansor_mlir.errors import AnsorError

F32_BYTES = 4
NEG_INF = "0xFF800000"

Shape = tuple[int, ...]
Args = dict[str, int]


@dataclass(frozen=True)
class Workload:
    """One suite entry at one shape: its MLIR, its tensors and its reference."""

    name: str
    shape: Shape
    func_name: str
    mlir: str
    input_shapes: tuple[Shape, ...]
    output_shapes: tuple[Shape, ...]
    flops: int
    min_bytes: int

    def inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Fixed-seed uniform(-1, 1) float32 inputs, one per function argument."""
        rng = np.random.default_rng(seed)
        return [rng.uniform(-1.0, 1.0, s).astype(np.float32) for s in self.input_shapes]

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The outputs computed by numpy (float64 accumulation), cast to float32."""
        spec = _SPECS[self.name]
        args = dict(zip(suite_args(self.name), self.shape, strict=True))
        outs = spec.reference(args, [np.asarray(x, dtype=np.float64) for x in inputs])
        return [np.asarray(o, dtype=np.float32) for o in outs]

    @property
    def label(self) -> str:
        return f"{self.name}({','.join(map(str, self.shape))})"


# --------------------------------------------------------------------------- MLIR emission


def _ttype(shape: Sequence[int]) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>" if shape else "tensor<f32>"


def _ints(values: Sequence[int]) -> str:
    return ", ".join(map(str, values))


def _map(dims: Sequence[str], exprs: Sequence[str]) -> str:
    return f"affine_map<({', '.join(dims)}) -> ({', '.join(exprs)})>"


class _Emitter:
    """Builds one function body: hands out SSA names, knows each value's shape.

    Every op the suite needs is one method, so the per-workload generators
    read as the computation and never repeat MLIR syntax.
    """

    def __init__(self, arg_shapes: Sequence[Shape]) -> None:
        self.arg_shapes = [tuple(s) for s in arg_shapes]
        self.args = [f"%arg{i}" for i in range(len(arg_shapes))]
        self.shapes: dict[str, Shape] = dict(zip(self.args, self.arg_shapes, strict=True))
        self.lines = ["%zero = arith.constant 0.0 : f32"]
        self.counter = 0

    def emit(self, shape: Sequence[int], text: str) -> str:
        name = f"%v{self.counter}"
        self.counter += 1
        self.shapes[name] = tuple(shape)
        self.lines.append(f"{name} = {text}")
        return name

    def t(self, value: str) -> str:
        return _ttype(self.shapes[value])

    def empty(self, shape: Sequence[int]) -> str:
        return self.emit(shape, f"tensor.empty() : {_ttype(shape)}")

    def filled(self, shape: Sequence[int], constant: str = "%zero") -> str:
        """A tensor of `shape` filled with an f32 SSA constant (the accumulator init)."""
        init = self.empty(shape)
        return self.emit(shape, f"linalg.fill ins({constant} : f32) outs({init} : {self.t(init)}) -> {_ttype(shape)}")

    def constant(self, literal: str) -> str:
        name = f"%c{self.counter}"
        self.counter += 1
        self.lines.append(f"{name} = arith.constant {literal} : f32")
        return name

    def pad(self, x: str, low: Sequence[int], high: Sequence[int] | None = None) -> str:
        """Zero-pad `x`; a no-op (no tensor.pad) when there is nothing to pad."""
        high = low if high is None else high
        if not any(low) and not any(high):
            return x
        shape = [d + lo + hi for d, lo, hi in zip(self.shapes[x], low, high, strict=True)]
        return self.emit(
            shape,
            f"tensor.pad {x} low[{_ints(low)}] high[{_ints(high)}] {{\n"
            f"  ^bb0({', '.join(f'%i{i}: index' for i in range(len(low)))}):\n"
            f"    tensor.yield %zero : f32\n"
            f"  }} : {self.t(x)} to {_ttype(shape)}",
        )

    def named(self, op: str, ins: Sequence[str], out_shape: Sequence[int], attrs: str = "") -> str:
        """A named linalg op accumulating into a zero-filled output."""
        init = self.filled(out_shape)
        attr_text = f" {{{attrs}}}" if attrs else ""
        return self.emit(
            out_shape,
            f"linalg.{op}{attr_text} ins({', '.join(ins)} : {', '.join(self.t(x) for x in ins)}) "
            f"outs({init} : {self.t(init)}) -> {_ttype(out_shape)}",
        )

    def conv(self, op: str, x: str, w: str, out_shape: Sequence[int], strides: Sequence[int],
             dilations: Sequence[int]) -> str:
        rank = len(strides)
        attrs = (f"dilations = dense<[{_ints(dilations)}]> : tensor<{rank}xi64>, "
                 f"strides = dense<[{_ints(strides)}]> : tensor<{rank}xi64>")
        return self.named(op, [x, w], out_shape, attrs)

    def generic(self, dims: Sequence[str], reductions: Sequence[str], ins: Sequence[tuple[str, Sequence[str]]],
                out: tuple[str, Sequence[str]], body: Sequence[str]) -> str:
        """A linalg.generic; `body` lines use %in0.. for inputs, %acc for the output, yield %r."""
        maps = [_map(dims, exprs) for _, exprs in (*ins, out)]
        iterators = ", ".join('"reduction"' if d in reductions else '"parallel"' for d in dims)
        in_values = [x for x, _ in ins]
        block_args = [f"%in{i}: f32" for i in range(len(ins))] + ["%acc: f32"]
        ins_text = f"ins({', '.join(in_values)} : {', '.join(self.t(x) for x in in_values)}) " if ins else ""
        init = out[0]
        inner = "".join(f"    {line}\n" for line in body)
        return self.emit(
            self.shapes[init],
            f"linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{iterators}]}}\n"
            f"    {ins_text}outs({init} : {self.t(init)}) {{\n"
            f"  ^bb0({', '.join(block_args)}):\n{inner}"
            f"    linalg.yield %r : f32\n"
            f"  }} -> {self.t(init)}",
        )

    def reshape(self, op: str, x: str, groups: Sequence[Sequence[int]], shape: Sequence[int]) -> str:
        """tensor.expand_shape / tensor.collapse_shape with reassociation `groups`."""
        reassoc = "[" + ", ".join(f"[{_ints(g)}]" for g in groups) + "]"
        suffix = f" output_shape [{_ints(shape)}]" if op == "expand_shape" else ""
        return self.emit(shape, f"tensor.{op} {x} {reassoc}{suffix} : {self.t(x)} into {_ttype(shape)}")

    def transpose(self, x: str, perm: Sequence[int]) -> str:
        shape = [self.shapes[x][i] for i in perm]
        init = self.empty(shape)
        return self.emit(shape, f"linalg.transpose ins({x} : {self.t(x)}) outs({init} : {self.t(init)}) "
                                f"permutation = [{_ints(perm)}]")

    def insert_strided(self, x: str, dest: str, offsets: Sequence[int], strides: Sequence[int]) -> str:
        """Scatter `x` into `dest` at `offsets`, one element every `strides` (zero insertion)."""
        return self.emit(
            self.shapes[dest],
            f"tensor.insert_slice {x} into {dest}[{_ints(offsets)}] [{_ints(self.shapes[x])}] [{_ints(strides)}] "
            f": {self.t(x)} into {self.t(dest)}",
        )

    def function(self, name: str, results: Sequence[str]) -> str:
        params = ", ".join(f"{a}: {_ttype(s)}" for a, s in zip(self.args, self.arg_shapes, strict=True))
        rtypes = ", ".join(self.t(r) for r in results)
        body = "".join(f"    {line}\n" for line in "\n".join(self.lines).splitlines())
        return (f"module {{\n  func.func @{name}({params}) -> ({rtypes}) {{\n{body}"
                f"    return {', '.join(results)} : {rtypes}\n  }}\n}}\n")


# --------------------------------------------------------------------------- shared shape logic


def _out_size(op: str, size: int, k: int, s: int, p: int, d: int = 1) -> int:
    out = (size + 2 * p - d * (k - 1) - 1) // s + 1
    if out <= 0:
        raise AnsorError(f"{op}: kernel {k} (dilation {d}) does not fit input size {size} with padding {p}")
    return out


def _spatial_pads(rank: int, p: int) -> list[int]:
    """Zero padding of a channels-last activation: only the spatial dims."""
    return [0] + [p] * rank + [0]


@dataclass(frozen=True)
class _Generated:
    mlir: str
    input_shapes: tuple[Shape, ...]
    output_shapes: tuple[Shape, ...]
    flops: int


def _finish(em: _Emitter, func_name: str, results: Sequence[str], flops: int) -> _Generated:
    return _Generated(
        mlir=em.function(func_name, results),
        input_shapes=tuple(em.arg_shapes),
        output_shapes=tuple(em.shapes[r] for r in results),
        flops=flops,
    )


def _conv_nd(op: str, a: Args, rank: int, dilation: int = 1) -> tuple[_Emitter, str, int]:
    """A channels-last N-d conv (C1D, C2D, C3D, DIL, ConvLayer's conv): emitter, result, flops."""
    n, ci, co, k, s, p = a["N"], a["CI"], a["CO"], a["k"], a["s"], a["p"]
    spatial = [a[d] for d in ("D", "H", "W", "L") if d in a]
    outs = [_out_size(op, size, k, s, p, dilation) for size in spatial]
    em = _Emitter([(n, *spatial, ci), (*[k] * rank, ci, co)])
    x = em.pad(em.args[0], _spatial_pads(rank, p))
    names = {1: "conv_1d_nwc_wcf", 2: "conv_2d_nhwc_hwcf", 3: "conv_3d_ndhwc_dhwcf"}
    y = em.conv(names[rank], x, em.args[1], (n, *outs, co), [s] * rank, [dilation] * rank)
    return em, y, 2 * n * prod(outs) * co * ci * k**rank


# --------------------------------------------------------------------------- generators


def _gen_gmm(a: Args) -> _Generated:
    b, n, m, k = a["B"], a["N"], a["M"], a["K"]
    em = _Emitter([(b, n, k), (b, k, m)])
    y = em.named("batch_matmul", em.args, (b, n, m))
    return _finish(em, "gmm", [y], 2 * b * n * m * k)


def _gen_conv(rank: int, func_name: str, dilated: bool = False) -> Callable[[Args], _Generated]:
    def generate(a: Args) -> _Generated:
        em, y, flops = _conv_nd(func_name.upper(), a, rank, a["dilation"] if dilated else 1)
        return _finish(em, func_name, [y], flops)

    return generate


def _gen_grp(a: Args) -> _Generated:
    n, h, w, ci, co, k, s, p, d, g = (a[x] for x in ("N", "H", "W", "CI", "CO", "k", "s", "p", "dilation", "groups"))
    for arg in ("CI", "CO"):
        if a[arg] % g:
            raise AnsorError(f"GRP: {arg}={a[arg]} is not divisible by groups={g}")
    oh, ow = _out_size("GRP", h, k, s, p, d), _out_size("GRP", w, k, s, p, d)
    em = _Emitter([(n, h, w, ci), (g, co // g, k, k, ci // g)])
    x = em.pad(em.args[0], _spatial_pads(2, p))
    hp, wp = em.shapes[x][1:3]
    xg = em.reshape("expand_shape", x, [[0], [1], [2], [3, 4]], (n, hp, wp, g, ci // g))
    yg = em.conv("conv_2d_nhwgc_gfhwc", xg, em.args[1], (n, oh, ow, g, co // g), [s, s], [d, d])
    y = em.reshape("collapse_shape", yg, [[0], [1], [2], [3, 4]], (n, oh, ow, co))
    return _finish(em, "grp", [y], 2 * n * oh * ow * co * k * k * (ci // g))


def _gen_dep(a: Args) -> _Generated:
    n, h, w, c, k, s, p = (a[x] for x in ("N", "H", "W", "C", "k", "s", "p"))
    oh, ow = _out_size("DEP", h, k, s, p), _out_size("DEP", w, k, s, p)
    em = _Emitter([(n, h, w, c), (k, k, c)])
    x = em.pad(em.args[0], _spatial_pads(2, p))
    y = em.conv("depthwise_conv_2d_nhwc_hwc", x, em.args[1], (n, oh, ow, c), [s, s], [1, 1])
    return _finish(em, "dep", [y], 2 * n * oh * ow * c * k * k)


def _gen_t2d(a: Args) -> _Generated:
    """Transposed conv as a stride-1 conv over the zero-inserted, padded input.

    The filter is (k, k, CI, CO) with out[y] += x[iy] * w[ky] at y = iy*s + ky - p;
    the equivalent direct conv reads it spatially reversed, through a gather of the
    weights as importers write it (8 MB per call at the suite's shape; ansor-mlir's
    phase decomposition folds it away, IREE's default build runs it).
    """
    n, h, w, ci, co, k, s, p = (a[x] for x in ("N", "H", "W", "CI", "CO", "k", "s", "p"))
    if p > k - 1:
        raise AnsorError(f"T2D: padding p={p} must be at most k-1={k - 1}")
    q = k - 1 - p
    zh, zw = (h - 1) * s + 1 + 2 * q, (w - 1) * s + 1 + 2 * q
    oh, ow = zh - k + 1, zw - k + 1
    em = _Emitter([(n, h, w, ci), (k, k, ci, co)])
    z = em.insert_strided(em.args[0], em.filled((n, zh, zw, ci)), (0, q, q, 0), (1, s, s, 1))
    # A gather, not a reversed indexing map: IREE's tiling rejects maps like (-kh + 3).
    flipped = em.generic(
        ("kh", "kw", "ci", "co"), (), [], (em.empty((k, k, ci, co)), ("kh", "kw", "ci", "co")),
        [*(f"%i{d} = linalg.index {d} : index" for d in range(4)),
         f"%last = arith.constant {k - 1} : index",
         "%fh = arith.subi %last, %i0 : index", "%fw = arith.subi %last, %i1 : index",
         f"%r = tensor.extract {em.args[1]}[%fh, %fw, %i2, %i3] : {em.t(em.args[1])}"],
    )
    y = em.conv("conv_2d_nhwc_hwcf", z, flipped, (n, oh, ow, co), [1, 1], [1, 1])
    return _finish(em, "t2d", [y], 2 * n * oh * ow * co * ci * k * k)


def _gen_cap(a: Args) -> _Generated:
    """TVM's conv2d_capsule_nhwijc: a 4x4 capsule matrix product inside each conv tap."""
    n, h, w, ci, co, k, s, p = (a[x] for x in ("N", "H", "W", "CI", "CO", "k", "s", "p"))
    cap = _capsule()
    oh, ow = _out_size("CAP", h, k, s, p), _out_size("CAP", w, k, s, p)
    em = _Emitter([(n, h, w, cap, cap, ci), (k, k, cap, cap, ci, co)])
    x = em.pad(em.args[0], [0, p, p, 0, 0, 0])
    dims = ("n", "oh", "ow", "i", "j", "co", "kh", "kw", "c", "rc")
    y = em.generic(
        dims, ("kh", "kw", "c", "rc"),
        [(x, ("n", f"oh * {s} + kh", f"ow * {s} + kw", "i", "c", "rc")),
         (em.args[1], ("kh", "kw", "c", "j", "rc", "co"))],
        (em.filled((n, oh, ow, cap, cap, co)), ("n", "oh", "ow", "i", "j", "co")),
        ["%m = arith.mulf %in0, %in1 : f32", "%r = arith.addf %acc, %m : f32"],
    )
    return _finish(em, "cap", [y], 2 * n * oh * ow * cap * cap * co * k * k * cap * ci)


def _gen_nrm(a: Args) -> _Generated:
    b, m, n = a["B"], a["M"], a["N"]
    em = _Emitter([(b, m, n)])
    sq = em.generic(("b", "m", "n"), ("m", "n"), [(em.args[0], ("b", "m", "n"))], (em.filled((b,)), ("b",)),
                    ["%m = arith.mulf %in0, %in0 : f32", "%r = arith.addf %acc, %m : f32"])
    y = em.generic(("b",), (), [(sq, ("b",))], (em.empty((b,)), ("b",)), ["%r = math.sqrt %in0 : f32"])
    return _finish(em, "nrm", [y], 2 * b * m * n)


def _gen_conv_layer(a: Args) -> _Generated:
    """conv2d, then bias add, bn multiply, bn add and relu in one elementwise generic."""
    em, conv, flops = _conv_nd("ConvLayer", a, 2)
    co = a["CO"]
    bias, scale, shift = (f"%arg{i}" for i in (2, 3, 4))
    for arg in (bias, scale, shift):
        em.args.append(arg)
        em.arg_shapes.append((co,))
        em.shapes[arg] = (co,)
    out_shape = em.shapes[conv]
    dims = ("n", "h", "w", "c")
    y = em.generic(
        dims, (), [(conv, dims), (bias, ("c",)), (scale, ("c",)), (shift, ("c",))],
        (em.empty(out_shape), dims),
        ["%b = arith.addf %in0, %in1 : f32", "%m = arith.mulf %b, %in2 : f32",
         "%s = arith.addf %m, %in3 : f32", "%r = arith.maximumf %s, %zero : f32"],
    )
    return _finish(em, "conv_layer", [y], flops + 4 * prod(out_shape))


def _gen_dense(a: Args) -> _Generated:
    """A fully connected layer: matmul, then bias add and relu in one elementwise generic."""
    m, k, n = a["M"], a["K"], a["N"]
    em = _Emitter([(m, k), (k, n), (n,)])
    product = em.named("matmul", em.args[:2], (m, n))
    y = em.generic(("m", "n"), (), [(product, ("m", "n")), (em.args[2], ("n",))], (em.empty((m, n)), ("m", "n")),
                   ["%b = arith.addf %in0, %in1 : f32", "%r = arith.maximumf %b, %zero : f32"])
    return _finish(em, "dense", [y], 2 * m * n * k + 2 * m * n)


def _gen_tbs(a: Args) -> _Generated:
    """Attention scores: transpose q and k to heads-major, then a batched contraction over n_dim.

    The contraction stays 4-d (batch and head both batch dims): collapsing them into
    one for `linalg.batch_matmul` keeps IREE from fusing the transposes into it.
    """
    b, s, h, d = a["batch"], a["seq_len"], a["n_head"], a["n_dim"]
    em = _Emitter([(b, s, h, d), (b, s, h, d)])
    q, k = em.transpose(em.args[0], (0, 2, 1, 3)), em.transpose(em.args[1], (0, 2, 3, 1))
    y = em.generic(("b", "h", "i", "j", "d"), ("d",), [(q, ("b", "h", "i", "d")), (k, ("b", "h", "d", "j"))],
                   (em.filled((b, h, s, s)), ("b", "h", "i", "j")),
                   ["%m = arith.mulf %in0, %in1 : f32", "%r = arith.addf %acc, %m : f32"])
    return _finish(em, "tbs", [y], 2 * b * h * s * s * d)


def _gen_softmax(a: Args) -> _Generated:
    """Last-dim softmax as the three generics frameworks lower it to: max, sum of exp, divide."""
    rows, cols = a["rows"], a["cols"]
    em = _Emitter([(rows, cols)])
    x = em.args[0]
    full, row = ("r", "c"), ("r",)
    mx = em.generic(full, ("c",), [(x, full)], (em.filled((rows,), em.constant(NEG_INF)), row),
                    ["%r = arith.maximumf %acc, %in0 : f32"])
    total = em.generic(full, ("c",), [(x, full), (mx, row)], (em.filled((rows,)), row),
                       ["%d = arith.subf %in0, %in1 : f32", "%e = math.exp %d : f32", "%r = arith.addf %acc, %e : f32"])
    y = em.generic(full, (), [(x, full), (mx, row), (total, row)], (em.empty((rows, cols)), full),
                   ["%d = arith.subf %in0, %in1 : f32", "%e = math.exp %d : f32", "%r = arith.divf %e, %in2 : f32"])
    return _finish(em, "softmax", [y], 5 * rows * cols)


# --------------------------------------------------------------------------- numpy references


def _ref_conv(x: np.ndarray, w: np.ndarray, s: int, p: int, d: int = 1) -> np.ndarray:
    """Channels-last N-d conv, filter (k..., CI, CO): one tensordot per kernel tap."""
    rank = x.ndim - 2
    x = np.pad(x, [(0, 0)] + [(p, p)] * rank + [(0, 0)])
    ks = w.shape[:rank]
    outs = [(x.shape[1 + i] - d * (ks[i] - 1) - 1) // s + 1 for i in range(rank)]
    y = np.zeros((x.shape[0], *outs, w.shape[-1]))
    for tap in np.ndindex(*ks):
        window = tuple(slice(t * d, t * d + s * (o - 1) + 1, s) for t, o in zip(tap, outs, strict=True))
        y += np.tensordot(x[(slice(None), *window)], w[tap], axes=([-1], [0]))
    return y


def _ref_gmm(a: Args, t: list[np.ndarray]) -> list[np.ndarray]:
    return [np.matmul(t[0], t[1])]


def _ref_conv_entry(dilated: bool) -> Callable[[Args, list[np.ndarray]], list[np.ndarray]]:
    def reference(a: Args, t: list[np.ndarray]) -> list[np.ndarray]:
        return [_ref_conv(t[0], t[1], a["s"], a["p"], a["dilation"] if dilated else 1)]

    return reference


def _ref_grp(a: Args, t: list[np.ndarray]) -> list[np.ndarray]:
    x, w, g = t[0], t[1], a["groups"]
    cig = x.shape[-1] // g
    parts = [_ref_conv(x[..., i * cig:(i + 1) * cig], np.transpose(w[i], (1, 2, 3, 0)), a["s"], a["p"], a["dilation"])
             for i in range(g)]
    return [np.concatenate(parts, axis=-1)]


def _ref_dep(a: Args, t: list[np.ndarray]) -> list[np.ndarray]:
    x, w, s, p = t[0], t[1], a["s"], a["p"]
    x = np.pad(x, [(0, 0), (p, p), (p, p), (0, 0)])
    k = w.shape[0]
    oh, ow = (x.shape[1] - k) // s + 1, (x.shape[2] - k) // s + 1
    y = np.zeros((x.shape[0], oh, ow, x.shape[3]))
    for kh, kw in np.ndindex(k, k):
        y += x[:, kh:kh + s * (oh - 1) + 1:s, kw:kw + s * (ow - 1) + 1:s, :] * w[kh, kw]
    return [y]


def _ref_t2d(a: Args, t: list[np.ndarray]) -> list[np.ndarray]:
    """Scatter form: every input pixel adds x @ w[ky, kx] at (iy*s + ky - p, ix*s + kx - p)."""
    x, w, s, p = t[0], t[1], a["s"], a["p"]
    n, h, wd, _ = x.shape
    k, co = w.shape[0], w.shape[3]
    full = np.zeros((n, (h - 1) * s + k, (wd - 1) * s + k, co))
    for ky, kx in np.ndindex(k, k):
        full[:, ky:ky + (h - 1) * s + 1:s, kx:kx + (wd - 1) * s + 1:s, :] += x @ w[ky, kx]
    return [full[:, p:full.shape[1] - p, p:full.shape[2] - p, :]]


def _ref_cap(a: Args, t: list[np.ndarray]) -> list[np.ndarray]:
    x, w, s, p = t[0], t[1], a["s"], a["p"]
    x = np.pad(x, [(0, 0), (p, p), (p, p), (0, 0), (0, 0), (0, 0)])
    k = w.shape[0]
    oh, ow = (x.shape[1] - k) // s + 1, (x.shape[2] - k) // s + 1
    y = 0.0
    for kh, kw in np.ndindex(k, k):
        window = x[:, kh:kh + s * (oh - 1) + 1:s, kw:kw + s * (ow - 1) + 1:s]
        y = y + np.einsum("nhwicr,cjro->nhwijo", window, w[kh, kw])
    return [y]


def _ref_nrm(a: Args, t: list[np.ndarray]) -> list[np.ndarray]:
    return [np.sqrt(np.sum(t[0] ** 2, axis=(1, 2)))]


def _ref_conv_layer(a: Args, t: list[np.ndarray]) -> list[np.ndarray]:
    conv = _ref_conv(t[0], t[1], a["s"], a["p"])
    return [np.maximum((conv + t[2]) * t[3] + t[4], 0.0)]


def _ref_dense(a: Args, t: list[np.ndarray]) -> list[np.ndarray]:
    return [np.maximum(t[0] @ t[1] + t[2], 0.0)]


def _ref_tbs(a: Args, t: list[np.ndarray]) -> list[np.ndarray]:
    return [np.einsum("bihd,bjhd->bhij", t[0], t[1])]


def _ref_softmax(a: Args, t: list[np.ndarray]) -> list[np.ndarray]:
    e = np.exp(t[0] - t[0].max(axis=-1, keepdims=True))
    return [e / e.sum(axis=-1, keepdims=True)]


# --------------------------------------------------------------------------- registry and API


@dataclass(frozen=True)
class _Spec:
    func_name: str
    generate: Callable[[Args], _Generated]
    reference: Callable[[Args, list[np.ndarray]], list[np.ndarray]]


_SPECS: dict[str, _Spec] = {
    "GMM": _Spec("gmm", _gen_gmm, _ref_gmm),
    "C1D": _Spec("c1d", _gen_conv(1, "c1d"), _ref_conv_entry(False)),
    "C2D": _Spec("c2d", _gen_conv(2, "c2d"), _ref_conv_entry(False)),
    "C3D": _Spec("c3d", _gen_conv(3, "c3d"), _ref_conv_entry(False)),
    "GRP": _Spec("grp", _gen_grp, _ref_grp),
    "DIL": _Spec("dil", _gen_conv(2, "dil", dilated=True), _ref_conv_entry(True)),
    "DEP": _Spec("dep", _gen_dep, _ref_dep),
    "T2D": _Spec("t2d", _gen_t2d, _ref_t2d),
    "CAP": _Spec("cap", _gen_cap, _ref_cap),
    "NRM": _Spec("nrm", _gen_nrm, _ref_nrm),
    "ConvLayer": _Spec("conv_layer", _gen_conv_layer, _ref_conv_layer),
    "TBS": _Spec("tbs", _gen_tbs, _ref_tbs),
    "softmax": _Spec("softmax", _gen_softmax, _ref_softmax),
    "Dense": _Spec("dense", _gen_dense, _ref_dense),
}


@cache
def _data() -> dict:
    """The bundled suite json."""
    return json.loads(resources.files("ansor_bench").joinpath("ansor_paper_suite.json").read_text())


def _suite() -> dict[str, dict]:
    """Every entry of the bundled suite json: operators, subgraphs, extras and held-out workloads alike."""
    data = _data()
    return {**data["operators"], **data["subgraphs"], **data["extras"], **data["held_out"]}


def suite_args(name: str) -> tuple[str, ...]:
    """The argument names of a suite entry's shape rows (N, H, W, CI, ...)."""
    return tuple(_suite()[name]["args"])


def _capsule() -> int:
    return int(_suite()["CAP"]["capsule"])


def suite_names() -> list[str]:
    """Suite entries in the order of the paper's tables (operators, subgraphs, then softmax); not the held-out
    workloads, which only `tools/held_out_report.py` tunes."""
    return [name for name in _suite() if name in _SPECS and name not in _data()["held_out"]]


def suite_shapes(name: str) -> list[Shape]:
    """The shape rows the bundled suite lists for `name`."""
    _spec(name)
    return [tuple(row) for row in _suite()[name]["shapes"]]


def _spec(name: str) -> _Spec:
    if name not in _SPECS:
        raise AnsorError(f"unknown workload {name!r}: expected one of {', '.join(_SPECS)}")
    return _SPECS[name]


def _check_args(name: str, shape: Sequence[int]) -> Args:
    args = suite_args(name)
    if len(shape) != len(args):
        raise AnsorError(f"{name}: expected {len(args)} shape values ({', '.join(args)}), got {len(shape)}: "
                         f"{list(shape)}")
    for arg, value in zip(args, shape, strict=True):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            raise AnsorError(f"{name}: {arg}={value!r} must be an integer")
        if value < (0 if arg == "p" else 1):
            raise AnsorError(f"{name}: {arg}={value} must be {'>= 0' if arg == 'p' else 'positive'}")
    return {arg: int(v) for arg, v in zip(args, shape, strict=True)}


def make_workload(name: str, shape: Sequence[int]) -> Workload:
    """The workload `name` at any shape row with the suite's arity (see the json `args`)."""
    spec = _spec(name)
    args = _check_args(name, shape)
    gen = spec.generate(args)
    elements = sum(prod(s) for s in (*gen.input_shapes, *gen.output_shapes))
    return Workload(
        name=name,
        shape=tuple(args.values()),
        func_name=spec.func_name,
        mlir=gen.mlir,
        input_shapes=gen.input_shapes,
        output_shapes=gen.output_shapes,
        flops=gen.flops,
        min_bytes=F32_BYTES * elements,
    )


def suite_workloads(names: Iterable[str] | None = None, first_only: bool = False) -> list[Workload]:
    """Workloads for the bundled shapes of `names` (all entries by default)."""
    result = []
    for name in suite_names() if names is None else names:
        shapes = suite_shapes(name)
        result.extend(make_workload(name, s) for s in (shapes[:1] if first_only else shapes))
    return result


def parse_workload_specs(specs: Iterable[str]) -> list[Workload]:
    """Workloads from `NAME` or `NAME:i,j` specs (suite entry, shape indices; default the first shape)."""
    out = []
    for spec in specs:
        name, _, picks = spec.partition(":")
        shapes = suite_shapes(name)
        try:
            indices = [int(x) for x in picks.split(",")] if picks else [0]
        except ValueError:
            raise AnsorError(f"workload '{spec}': shape indices must be integers, e.g. {name}:0,2") from None
        for i in indices:
            if not 0 <= i < len(shapes):
                raise AnsorError(f"workload '{spec}': {name} has shapes 0..{len(shapes) - 1}")
            out.append(make_workload(name, shapes[i]))
    return out

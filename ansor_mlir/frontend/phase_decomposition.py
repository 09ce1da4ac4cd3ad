"""Phase decomposition: a transposed convolution without the multiplications by its inserted zeros.

Importers lower a transposed convolution (ONNX `ConvTranspose`, PyTorch
`ConvTranspose2d`) to a stride-1 convolution over a zero-inserted input: the
real input `X` is scattered with a stride `s` into a zero tensor
(`tensor.insert_slice` with strides into a zero `linalg.fill`, possibly
padded further by `tensor.pad`). IREE puts the scatter in a dispatch of its
own, so the convolution's task gets an ordinary tensor and no schedule of it
can skip the zeros: at stride 2, 3 of every 4 multiplications read one.

Per window dimension, output `y = s*q + r` reads the zero-inserted input at
`y + d*k`, which holds `X[j]` only where `y + d*k = o + s*j` (`o`: where
`X[0]` sits). For each residue `r` (a *phase*) the taps that hit real
elements are `k = k0 + s*t` with `d*k0 = o - r (mod s)`, and they read
`X[q + d*t + c]` with `c = (r + d*k0 - o) / s`: a stride-1 convolution over
`X` itself (sliced and zero-padded to the window it reads) with the filter's
taps `k0, k0 + s, ...` (a strided slice of the filter). The rewrite replaces
the convolution by one such convolution per phase (`s_h * s_w` in 2-D, fewer
when a phase has no output) and interleaves their results with strided
`tensor.insert_slice`s. A phase with no taps (kernel smaller than the
stride) or whose window misses `X` is its output initializer.

The match reads structure only: a linalg op with two inputs and one output
whose body multiplies its inputs and accumulates, whose output and filter
maps are plain loop indices and whose input map reads `oh + d*kh` (stride 1)
in the window dimensions; the input's producers are read back to the zero
insertion. Each phase is a clone of the original op (named or generic) with
new operands, so IREE sees the op kind it would have seen.

Importers flip the filter with a gather (a generic of `tensor.extract`s at
`k - 1 - kh`); when the filter is a weight the program is given, that flip
copies every weight on every call, a dispatch that can cost more than the
convolution (measured: docs/reports/program_rewrites.md). A filter gather
that reverses window dimensions only is folded
away instead: a convolution with the reversed filter is the convolution with
the filter as given over the input reversed, reversed back
(`conv(Z, rev W)[o] = conv(rev Z, W)[O - 1 - o]`), and reversing the
zero-inserted input is inserting the reversed `X` at the mirrored offset; the
phases then read the given filter (through a transpose where the gather also
permuted it) and only `X` and the output, both small, are reversed. Dilations that
share a factor with the stride (`gcd(d, s) > 1`) would need another
dilation per phase, and any other input (grouped convolutions reshape it
first) does not match: those convolutions are left as they are.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import linalg, tensor

from ansor_mlir.core.affine import AffineMap
from ansor_mlir.frontend.affine_maps import affine_map_from_ir, convolution_window
from ansor_mlir.frontend.tensor_ir import (
    Gather,
    add_elementwise,
    erase_unused,
    flip,
    is_zeros,
    multiplies_and_accumulates,
    pad_with_zeros,
    pads_with_zero,
    read_gather,
    slice_of,
    static_tensor,
    transpose_of,
    zero_constant,
)
from ansor_mlir.mlir.context import producer, walk

NAME = "phase-decomposition"


@dataclass(frozen=True)
class WindowDim:
    """One window dimension: its operand positions and where the zero insertion put `X` along it."""

    input_dim: int  # position in the convolution's input (the zero-inserted tensor)
    filter_dim: int
    output_dim: int
    stride: int  # zero-insertion stride: X[j] sits at offset + stride * j
    offset: int
    size: int  # X's extent
    taps: int  # the filter's extent
    dilation: int
    outputs: int  # the output's extent


def mirrored(dim: WindowDim) -> WindowDim:
    """The dimension of the reversed zero-inserted input: the reversed `X` inserted at the mirrored offset (over
    the extent the convolution reads, `outputs + dilation * (taps - 1)`)."""
    extent = dim.outputs + dim.dilation * (dim.taps - 1)
    return dataclasses.replace(dim, offset=extent - 1 - dim.offset - dim.stride * (dim.size - 1))


@dataclass(frozen=True)
class Phase:
    """Outputs `residue, residue + s, ...` of one window dimension: `count` of them, reading the filter's taps
    `first_tap, first_tap + s, ...` (`taps` of them) at `X[q + dilation*t + shift]`."""

    residue: int
    count: int
    first_tap: int
    taps: int
    shift: int

    def window(self, dim: WindowDim) -> tuple[int, int, int, int]:
        """(first, last) element of `X` read, and the zeros padded (low, high) to reach the window."""
        start = self.shift
        stop = self.shift + self.count - 1 + dim.dilation * (self.taps - 1)
        first, last = max(start, 0), min(stop, dim.size - 1)
        return first, last, first - start, stop - last

    def reads_x(self, dim: WindowDim) -> bool:
        first, last, _, _ = self.window(dim)
        return self.taps > 0 and first <= last


def phases(dim: WindowDim) -> list[Phase]:
    """The phases of one window dimension that have outputs (one phase when it is not zero-inserted)."""
    s, d = dim.stride, dim.dilation
    inverse = pow(d, -1, s) if s > 1 else 0
    out = []
    for r in range(s):
        count = -(-(dim.outputs - r) // s)
        if count <= 0:
            continue
        k0 = (dim.offset - r) * inverse % s
        taps = max(0, -(-(dim.taps - k0) // s))
        shift, exact = divmod(r + d * k0 - dim.offset, s)
        assert exact == 0, "d * k0 = offset - r (mod s) by construction"
        out.append(Phase(r, count, k0, taps, shift))
    return out


@dataclass(frozen=True)
class Match:
    """A convolution over a zero-inserted input: the op, the real input `X` and its window dimensions."""

    op: ir.Operation
    source: ir.Value
    dims: tuple[WindowDim, ...]
    producers: tuple[ir.Operation, ...]  # the zero insertion, erased when nothing else reads it


def decompose_transposed_convolutions(module: ir.Module) -> int:
    """Rewrite every convolution over a zero-inserted input in `module` into its phases; how many were."""
    matches = [m for m in (match_transposed_convolution(op) for op in list(walk(module.operation))) if m]
    for found in matches:
        _decompose(found)
    return len(matches)


def match_transposed_convolution(op: ir.Operation) -> Match | None:
    """The match when `op` is a stride-1 multiply-accumulate convolution over a zero-inserted input."""
    raw_maps = linalg.get_indexing_maps(op) if op.name.startswith("linalg.") else None
    if raw_maps is None or len(raw_maps) != 3 or len(op.operands) != 3 or len(op.results) != 1:
        return None
    maps = [affine_map_from_ir(ir.AffineMapAttr(m).value) for m in raw_maps]
    types = [static_tensor(v.type) for v in (*op.operands, op.results[0])]
    if None in types or not multiplies_and_accumulates(op):
        return None
    inserted = _zero_insertion(op.operands[0])
    if inserted is None:
        return None
    source, offsets, strides, producers = inserted
    windows = _window_dims(maps, types, static_tensor(source.type), offsets, strides)
    if windows is None or all(w.stride == 1 for w in windows):
        return None
    return Match(op, source, tuple(windows), tuple(producers))


def _window_dims(maps: Sequence[AffineMap], types: Sequence[ir.RankedTensorType], source: ir.RankedTensorType,
                 offsets: Sequence[int], strides: Sequence[int]) -> list[WindowDim] | None:
    """The window dimensions (`oh + d*kh` in the input map); None unless every other input dimension is one
    loop read where the zero insertion left the tensor as it was."""
    in_map, filter_map, out_map = maps
    if not all(e.is_dim() for e in (*filter_map.results, *out_map.results)):
        return None
    out_dims = [e.position for e in out_map.results]
    filter_dims = [e.position for e in filter_map.results]
    windows = []
    for i, expr in enumerate(in_map.results):
        if expr.is_dim():
            if strides[i] != 1 or offsets[i] != 0 or source.shape[i] != types[0].shape[i]:
                return None
            continue
        window = convolution_window(expr, out_dims, filter_dims)
        if window is None or window[2] != 1:  # stride 1 over the zero-inserted input
            return None
        out_dim, filter_dim, _, dilation = window
        if math.gcd(dilation, strides[i]) != 1:
            return None
        windows.append(WindowDim(i, filter_dim, out_dim, strides[i], offsets[i], source.shape[i],
                                 types[1].shape[filter_dim], dilation, types[3].shape[out_dim]))
    return windows


def _zero_insertion(value: ir.Value) -> tuple[ir.Value, list[int], list[int], list[ir.Operation]] | None:
    """(X, offsets, strides, producers) when `value` is `X` scattered into zeros: `tensor.insert_slice` with
    static strides into a zero fill, under any number of zero `tensor.pad`s."""
    low: list[int] | None = None
    producers = []
    while True:
        op = producer(value)
        if op is None:
            return None
        producers.append(op)
        if op.name == "tensor.pad" and len(op.operands) == 1 and pads_with_zero(op):
            pad = list(ir.DenseI64ArrayAttr(op.attributes["static_low"]))
            low = pad if low is None else [a + b for a, b in zip(low, pad, strict=True)]
            value = op.operands[0]
            continue
        if op.name != "tensor.insert_slice" or len(op.operands) != 2 or not is_zeros(op.operands[1]):
            return None
        source, offsets, sizes, strides = op.operands[0], *(
            list(ir.DenseI64ArrayAttr(op.attributes[name])) for name in ("static_offsets", "static_sizes",
                                                                          "static_strides"))
        source_type = static_tensor(source.type)
        if source_type is None or list(source_type.shape) != sizes:
            return None
        low = low or [0] * len(offsets)
        return source, [a + b for a, b in zip(offsets, low, strict=True)], strides, producers


# ---- the rewrite ----------------------------------------------------------------------------------------------


def _decompose(match: Match) -> None:
    op = match.op
    w, init = op.operands[1], op.operands[2]
    out_type = ir.RankedTensorType(op.results[0].type)
    element = out_type.element_type
    gather = _window_flip(w, match.dims)
    with ir.InsertionPoint(op), op.location:
        zeros: dict[ir.Type, ir.Value] = {}
        zero = zero_constant(element, zeros)
        source, dims, flipped = match.source, match.dims, ()
        if gather is not None:
            flipped = tuple(d for d in dims if d.filter_dim in gather.reversed_dims())
            w = transpose_of(gather)
            source = flip(source, [d.input_dim for d in flipped])
            dims = tuple(mirrored(d) if d in flipped else d for d in dims)
        result = tensor.empty(list(out_type.shape), element)
        for combo in itertools.product(*(phases(dim) for dim in dims)):
            picked = list(zip(dims, combo, strict=True))
            out_offsets, out_sizes, out_strides = _phase_slice(out_type, [(d.output_dim, p.residue, p.count, d.stride)
                                                                          for d, p in picked])
            value = linalg.fill(zero, outs=[tensor.empty(out_sizes, element)])
            if all(p.reads_x(d) for d, p in picked):
                value = _phase_convolution(op, source, w, value, picked, zeros)
            result = tensor.insert_slice(value, result, [], [], [], out_offsets, out_sizes, out_strides)
        if flipped:
            result = flip(result, [d.output_dim for d in flipped])
        if not is_zeros(init):
            # The accumulator's initial values (a bias) are added once, to the whole interleaved result: a
            # strided slice of them as each phase's accumulator trips IREE 3.13's bufferization.
            result = add_elementwise(result, init)
    op.results[0].replace_all_uses_with(result)
    op.erase()
    if gather is not None and not any(True for _ in gather.op.results[0].uses):
        made_init = producer(gather.op.operands[0])
        gather.op.erase()
        if made_init is not None:
            erase_unused(made_init)
    for dead in (match.producers[0], producer(init)):
        if dead is not None:
            erase_unused(dead)


def _window_flip(w: ir.Value, dims: Sequence[WindowDim]) -> Gather | None:
    """The gather making the filter `w` when it reverses some window dimensions and nothing else."""
    gather = read_gather(w)
    reversed_dims = gather.reversed_dims() if gather is not None else frozenset()
    return gather if reversed_dims and reversed_dims <= {d.filter_dim for d in dims} else None


def _phase_convolution(op: ir.Operation, source: ir.Value, w: ir.Value, init: ir.Value,
                       picked: Sequence[tuple[WindowDim, Phase]], zeros: dict[ir.Type, ir.Value]) -> ir.Value:
    """The convolution of one phase: the original op over `X`'s window and the phase's taps of the filter."""
    x_type = ir.RankedTensorType(source.type)
    offsets, sizes = [0] * x_type.rank, list(x_type.shape)
    low, high = [0] * x_type.rank, [0] * x_type.rank
    w_type = ir.RankedTensorType(w.type)
    w_offsets, w_sizes, w_strides = [0] * w_type.rank, list(w_type.shape), [1] * w_type.rank
    for dim, phase in picked:
        first, last, low[dim.input_dim], high[dim.input_dim] = phase.window(dim)
        offsets[dim.input_dim], sizes[dim.input_dim] = first, last - first + 1
        w_offsets[dim.filter_dim], w_sizes[dim.filter_dim] = phase.first_tap, phase.taps
        w_strides[dim.filter_dim] = dim.stride
    window = pad_with_zeros(slice_of(source, offsets, sizes, [1] * x_type.rank), low, high, zeros)
    taps = slice_of(w, w_offsets, w_sizes, w_strides)
    phase_op = op.clone()
    for index, value in enumerate((window, taps, init)):
        phase_op.operands[index] = value
    phase_op.results[0].set_type(init.type)
    return phase_op.results[0]


def _phase_slice(out_type: ir.RankedTensorType, picks: Sequence[tuple[int, int, int, int]]
                 ) -> tuple[list[int], list[int], list[int]]:
    """(offsets, sizes, strides) of one phase's outputs: every `stride`-th element from `residue`."""
    offsets, sizes, strides = [0] * out_type.rank, list(out_type.shape), [1] * out_type.rank
    for position, residue, count, stride in picks:
        offsets[position], sizes[position], strides[position] = residue, count, stride
    return offsets, sizes, strides

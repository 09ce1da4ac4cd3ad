"""Border split: a padded convolution without the multiplications by its padding.

A convolution over a zero-padded input multiplies zeros wherever a window
overhangs the border. Over a wide window dimension that is a few percent of
its FLOPs and no schedule should care; over a short one it is not: C3D's
7-tap window at stride 2 over a 16-deep input, padded by 3, puts 6 of every
56 taps along that depth on padding, 11% of the convolution. PyTorch's
(oneDNN's) kernel skips them; a schedule of IREE's dispatch cannot, since
the dispatch computes every output with every tap
(measured: docs/reports/program_rewrites.md).

Along the window dimension with the largest share of padded taps (when it is
at least `MIN_PADDED_SHARE`), the rewrite cuts the outputs into runs that
read the same taps: the interior, which reads no padding, and each border
output, which reads only its taps that land on real input. Each run is the
original op (cloned, so IREE sees the op kind it would have seen) over the
slice of the unpadded input it reads, padded in the other window dimensions
as before, and the slice of the filter holding its taps; the runs' results
are put together with `tensor.insert_slice`s, and an accumulator's initial
values added once to the whole. A run whose taps all land on padding is
zeros.

The match reads structure only: a linalg op with two inputs and one output
whose body multiplies its inputs and accumulates, whose output and filter
maps are plain loop indices and whose input map reads `s*oh + d*kh` in its
window dimensions and a loop index elsewhere; its input is a `tensor.pad`
with zeros in window dimensions only, read by that op alone. It is a default
rewrite (`rewrites=` without it turns it off); each run is a task of its own,
tuned apart, which is why the thresholds below keep it to large savings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import linalg, tensor

from ansor_mlir.core.affine import AffineMap
from ansor_mlir.frontend.affine_maps import affine_map_from_ir, convolution_window
from ansor_mlir.frontend.dispatch_regions import REGION
from ansor_mlir.frontend.tensor_ir import (
    add_elementwise,
    erase_unused,
    is_zeros,
    multiplies_and_accumulates,
    pad_with_zeros,
    pads_with_zero,
    slice_of,
    static_tensor,
    zero_constant,
)
from ansor_mlir.mlir.context import ancestors, producer, walk

NAME = "border-split"
# Split only along a window dimension where at least this share of the taps lands on padding, and only when
# that skips at least this many multiply-accumulates: each run is a dispatch and a task of its own, and a
# transposed convolution's 4x4 phases (T2D) would become twelve tiny tasks to save 2 million.
MIN_PADDED_SHARE = 0.08
MIN_SKIPPED_MACS = 25_000_000


@dataclass(frozen=True)
class Window:
    """One window dimension of a padded convolution: operand positions, `s*o + d*k` and the real input's
    extent with the padding before it."""

    input_dim: int
    filter_dim: int
    output_dim: int
    stride: int
    dilation: int
    size: int  # the unpadded input's extent
    low: int  # zeros padded before it
    taps: int
    outputs: int

    def real_taps(self, output: int) -> tuple[int, int]:
        """[first, stop) of the taps of `output` that read the real input (first >= stop: none does)."""
        start = self.stride * output - self.low
        first = next((k for k in range(self.taps) if start + self.dilation * k >= 0), self.taps)
        stop = next((k for k in range(self.taps - 1, -1, -1) if start + self.dilation * k < self.size), -1) + 1
        return first, max(first, stop)

    def padded_share(self) -> float:
        """The share of (output, tap) pairs that read padding."""
        real = sum(stop - first for first, stop in map(self.real_taps, range(self.outputs)))
        return 1.0 - real / (self.outputs * self.taps)

    def runs(self) -> list[tuple[int, int, int, int]]:
        """(first output, stop, first tap, stop tap): consecutive outputs that read the same taps."""
        runs: list[tuple[int, int, int, int]] = []
        for output in range(self.outputs):
            taps = self.real_taps(output)
            if runs and runs[-1][2:] == taps:
                runs[-1] = (runs[-1][0], output + 1, *taps)
            else:
                runs.append((output, output + 1, *taps))
        return runs


@dataclass(frozen=True)
class Match:
    """A convolution over a zero-padded input, the window dimension to split along, and the pad."""

    op: ir.Operation
    pad: ir.Operation
    window: Window
    low: tuple[int, ...]  # the pad's, per input dimension
    high: tuple[int, ...]


def split_padded_borders(module: ir.Module, min_skipped_macs: int = MIN_SKIPPED_MACS) -> int:
    """Split every matching padded convolution of `module` at its borders; how many were."""
    matches = [m for m in (match_padded_convolution(op, min_skipped_macs) for op in list(walk(module.operation)))
               if m]
    for found in matches:
        _split(found)
    return len(matches)


def match_padded_convolution(op: ir.Operation, min_skipped_macs: int = MIN_SKIPPED_MACS) -> Match | None:
    """The match when `op` multiplies and accumulates over a zero-padded input whose padding is worth skipping."""
    raw_maps = linalg.get_indexing_maps(op) if op.name.startswith("linalg.") else None
    if raw_maps is None or len(raw_maps) != 3 or len(op.operands) != 3 or len(op.results) != 1:
        return None
    if any(parent.name == REGION for parent in ancestors(op)):
        return None
    types = [static_tensor(v.type) for v in (*op.operands, op.results[0])]
    pad = producer(op.operands[0])
    if None in types or pad is None or pad.name != "tensor.pad" or len(list(op.operands[0].uses)) != 1:
        return None
    if len(pad.operands) != 1 or not pads_with_zero(pad) or not multiplies_and_accumulates(op):
        return None
    source = static_tensor(pad.operands[0].type)
    if source is None:
        return None
    low, high = (tuple(ir.DenseI64ArrayAttr(pad.attributes[n])) for n in ("static_low", "static_high"))
    maps = [affine_map_from_ir(ir.AffineMapAttr(m).value) for m in raw_maps]
    windows = _windows(maps, types, source, low, high)
    if not windows:
        return None
    best = max(windows, key=Window.padded_share)
    if best.padded_share() < MIN_PADDED_SHARE or best.padded_share() * _macs(maps, types) < min_skipped_macs:
        return None
    return Match(op, pad, best, low, high)


def _macs(maps: Sequence[AffineMap], types: Sequence[ir.RankedTensorType]) -> int:
    """Multiply-accumulates of the op: the product of its loops' extents (each one a filter or output index)."""
    filter_and_output = zip(maps[1:], types[1:3], strict=True)
    extents = {e.position: n for m, t in filter_and_output for e, n in zip(m.results, t.shape, strict=True)}
    return math.prod(extents.values())


def _windows(maps: Sequence[AffineMap], types: Sequence[ir.RankedTensorType], source: ir.RankedTensorType,
             low: Sequence[int], high: Sequence[int]) -> list[Window]:
    """The window dimensions; none unless every other input dimension is one loop, unpadded, and every window
    reads only its padded extent."""
    in_map, filter_map, out_map = maps
    if not all(e.is_dim() for e in (*filter_map.results, *out_map.results)):
        return []
    out_dims = [e.position for e in out_map.results]
    filter_dims = [e.position for e in filter_map.results]
    windows = []
    for i, expr in enumerate(in_map.results):
        if expr.is_dim():
            if low[i] or high[i]:
                return []
            continue
        loops = convolution_window(expr, out_dims, filter_dims)
        if loops is None:
            return []
        out_dim, filter_dim, stride, dilation = loops
        taps, outputs = types[1].shape[filter_dim], types[3].shape[out_dim]
        if stride * (outputs - 1) + dilation * (taps - 1) >= types[0].shape[i]:
            return []
        windows.append(Window(i, filter_dim, out_dim, stride, dilation, source.shape[i], low[i], taps, outputs))
    return windows


# ---- the rewrite ----------------------------------------------------------------------------------------------


def _split(match: Match) -> None:
    op, window = match.op, match.window
    source, w, init = match.pad.operands[0], op.operands[1], op.operands[2]
    out_type = ir.RankedTensorType(op.results[0].type)
    element = out_type.element_type
    with ir.InsertionPoint(op), op.location:
        zeros: dict[ir.Type, ir.Value] = {}
        result = tensor.empty(list(out_type.shape), element)
        for first_out, stop_out, first_tap, stop_tap in window.runs():
            offsets, sizes = [0] * out_type.rank, list(out_type.shape)
            offsets[window.output_dim], sizes[window.output_dim] = first_out, stop_out - first_out
            value = linalg.fill(zero_constant(element, zeros), outs=[tensor.empty(sizes, element)])
            if first_tap < stop_tap:
                value = _run(op, match, source, w, value, (first_out, stop_out, first_tap, stop_tap), zeros)
            result = tensor.insert_slice(value, result, [], [], [], offsets, sizes, [1] * out_type.rank)
        if not is_zeros(init):
            # The accumulator's initial values (a bias) are added once, to the whole result: a slice of them as
            # a run's accumulator trips IREE 3.13's bufferization ("write affecting operations on global
            # resources are restricted to workgroup distributed contexts").
            result = add_elementwise(result, init)
    op.results[0].replace_all_uses_with(result)
    op.erase()
    for dead in (match.pad, producer(init)):
        if dead is not None:
            erase_unused(dead)


def _run(op: ir.Operation, match: Match, source: ir.Value, w: ir.Value, init: ir.Value,
         run: tuple[int, int, int, int], zeros: dict[ir.Type, ir.Value]) -> ir.Value:
    """One run's convolution: the op over the real input its outputs read (padded as before in the other window
    dimensions) and its taps of the filter."""
    window = match.window
    first_out, stop_out, first_tap, stop_tap = run
    x_type = ir.RankedTensorType(source.type)
    offsets, sizes = [0] * x_type.rank, list(x_type.shape)
    first = window.stride * first_out - window.low + window.dilation * first_tap
    last = window.stride * (stop_out - 1) - window.low + window.dilation * (stop_tap - 1)
    offsets[window.input_dim], sizes[window.input_dim] = first, last - first + 1
    low, high = list(match.low), list(match.high)
    low[window.input_dim] = high[window.input_dim] = 0
    x = pad_with_zeros(slice_of(source, offsets, sizes, [1] * x_type.rank), low, high, zeros)
    w_type = ir.RankedTensorType(w.type)
    w_offsets, w_sizes = [0] * w_type.rank, list(w_type.shape)
    w_offsets[window.filter_dim], w_sizes[window.filter_dim] = first_tap, stop_tap - first_tap
    taps = slice_of(w, w_offsets, w_sizes, [1] * w_type.rank)
    run_op = op.clone()
    for index, value in enumerate((x, taps, init)):
        run_op.operands[index] = value
    run_op.results[0].set_type(init.type)
    return run_op.results[0]

"""Winograd rewrite: 3x3 stride-1 channels-last convolutions as Winograd F(6x6, 3x3) over linalg generics.

A direct 3x3 convolution does 9 multiply-adds per output and channel pair;
Winograd's F(6x6, 3x3) does 64 per 6x6 output tile, 7/9 fewer where the image
fills its tiles (Lavin and Gray 2016; TVM's `conv2d_winograd_nhwc`). The
convolution becomes four parts, each an ordinary task the search tunes:
- the filter transform `G w G^T` of constant weights, one generic that IREE
  hoists and evaluates at compile time (`mlir.iree_compiler.winograd_flags`:
  the transformed filter is 64/9 the size of its weights, beyond IREE's
  default hoisting threshold);
- the input transform `B^T d B`, two generics (rows, then columns) whose
  innermost dimension is the contiguous channel, so they vectorize as
  channel vectors (IREE's own `winograd.input_transform` op, tile by tile,
  ran several times slower on the same input);
- a batched matmul over the 64 tile positions;
- the output transform `A^T m A`, two generics, sliced to the output and
  added to the convolution's initial value.

It converts a convolution only where it pays in multiply-adds and in reuse:
each transformed weight is read once per tile row, so the batched matmul
needs enough tiles to stay compute-bound (`MIN_ROWS`); a late ResNet stage
(7x7 outputs: 4 tiles, 64 MB of transformed weights for 512 channels) reads
more weights than it saves. Opt-in (`rewrites=...+winograd`, after
channels-last): it rounds differently from the direct convolution.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import arith, linalg, tensor

from ansor_mlir.frontend.tensor_ir import add_elementwise, is_zeros, pad_with_zeros
from ansor_mlir.mlir.context import dense_ints, producer, walk
from ansor_mlir.mlir.iree_compiler import WINOGRAD_FILTER_MARK

NAME = "winograd"
OUTPUT_TILE = 6
KERNEL = 3
ALPHA = OUTPUT_TILE + KERNEL - 1  # input tile of F(6x6, 3x3): 8x8 positions, 64 products per tile
# Interpolation points of F(6, 3), the usual well-conditioned choice (and infinity, the last row).
POINTS = (Fraction(0), Fraction(1), Fraction(-1), Fraction(1, 2), Fraction(-1, 2), Fraction(2), Fraction(-2))
# Convert only where the batched matmul does at most this share of the direct convolution's multiply-adds.
MAX_WORK_SHARE = 0.5
# Each transformed weight is used once per tile, so the batched matmul does rows/2 FLOPs per weight byte it reads;
# below 8 rows (4 FLOP/byte) it is bound by the bandwidth beyond L2 on x86 and Arm server cores, whose balance
# against it is 4 to 10 FLOP/byte.
MIN_ROWS = 8
CONSTANT_OPS = frozenset({"arith.constant", "util.global.load", "linalg.transpose", "tensor.empty"})


def transform_matrices() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`A^T` (6x8), `G` (8x3) and `B^T` (8x8) of F(6, 3) by the Cook-Toom construction over `POINTS`:
    `y = A^T ((G g) * (B^T d))` is the correlation of `d` (8 values) with `g` (3 taps)."""
    n = ALPHA - 1

    def product(skip: int | None) -> list[Fraction]:  # coefficients of prod (x - p), ascending powers
        coefficients = [Fraction(1)]
        for index, point in enumerate(POINTS):
            if index != skip:
                coefficients = [a - point * b for a, b in zip([Fraction(0), *coefficients], [*coefficients, 0],
                                                               strict=True)]
        return coefficients

    at = [[point ** i for point in POINTS] + [Fraction(int(i == OUTPUT_TILE - 1))] for i in range(OUTPUT_TILE)]
    g = [[point ** k / math.prod(point - other for other in POINTS if other != point) for k in range(KERNEL)]
         for point in POINTS] + [[Fraction(int(k == KERNEL - 1)) for k in range(KERNEL)]]
    bt = [[*product(j), Fraction(0)] for j in range(n)] + [product(None)]
    return tuple(np.array(m, dtype=np.float64) for m in (at, g, bt))


def convert_to_winograd(module: ir.Module) -> int:
    """Rewrite the convolutions of `module` that Winograd repays, in place; returns how many."""
    chosen = [op for op in walk(module.operation) if pays(op)]
    for op in chosen:
        _to_winograd(op)
    return len(chosen)


def pays(op: ir.Operation) -> bool:
    """A static 3x3 stride-1 NHWC f32 convolution of constant weights whose Winograd form saves work and stays
    compute-bound."""
    if op.name != "linalg.conv_2d_nhwc_hwcf" or not _unit_window(op):
        return False
    types = [v.type for v in (*op.operands, *op.results)]
    if not all(isinstance(t, ir.RankedTensorType) and ir.RankedTensorType(t).has_static_shape for t in types):
        return False
    if any(not isinstance(ir.RankedTensorType(t).element_type, ir.F32Type) for t in types):
        return False
    n, oh, ow, _ = ir.RankedTensorType(op.results[0].type).shape
    if tuple(ir.RankedTensorType(op.operands[1].type).shape[:2]) != (KERNEL, KERNEL) or not _constant(op.operands[1]):
        return False
    rows = n * _tiles(oh) * _tiles(ow)
    share = ALPHA * ALPHA * rows / (KERNEL * KERNEL * n * oh * ow)
    return share <= MAX_WORK_SHARE and rows >= MIN_ROWS


def _tiles(extent: int) -> int:
    return math.ceil(extent / OUTPUT_TILE)


def _unit_window(op: ir.Operation) -> bool:
    return all(name not in op.attributes or set(dense_ints(op.attributes[name])) == {1}
               for name in ("strides", "dilations"))


def _constant(value: ir.Value, depth: int = 4) -> bool:
    """Whether `value` is computed from constants or immutable globals alone (through transposes)."""
    owner = producer(value)
    if owner is None or owner.name not in CONSTANT_OPS or depth == 0:
        return False
    if owner.name == "util.global.load":
        return "is_immutable" in owner.attributes
    return all(_constant(operand, depth - 1) for operand in owner.operands)


def _to_winograd(op: ir.Operation) -> None:
    x, w, init = op.operands[0], op.operands[1], op.operands[2]
    n, oh, ow, k = ir.RankedTensorType(init.type).shape
    c = ir.RankedTensorType(w.type).shape[2]
    th, tw = _tiles(oh), _tiles(ow)
    at, g, bt = transform_matrices()
    with ir.InsertionPoint(op), op.location:
        f32 = ir.F32Type.get()
        # The input grown to whole tiles: 6 t + 2 rows and columns, zeros beyond the input.
        _, h, wd, _ = ir.RankedTensorType(x.type).shape
        padded = pad_with_zeros(x, [0, 0, 0, 0], [0, OUTPUT_TILE * th + 2 - h, OUTPUT_TILE * tw + 2 - wd, 0], {})
        u = _contract(_matrix(g), _contract(_matrix(g), w, [ALPHA, KERNEL, c, k], ("a", "j", "c", "k"),
                                            ("i", "j", "c", "k"), "a", "i"),
                      [ALPHA, ALPHA, c, k], ("a", "b", "c", "k"), ("a", "j", "c", "k"), "b", "j")
        u.owner.attributes[WINOGRAD_FILTER_MARK] = ir.UnitAttr.get()
        rows = _contract(_matrix(bt), padded, [ALPHA, n, th, OUTPUT_TILE * tw + 2, c], ("a", "n", "t", "w", "c"),
                         ("n", "6t+i", "w", "c"), "a", "i")
        v = _contract(_matrix(bt), rows, [ALPHA, ALPHA, n, th, tw, c], ("a", "b", "n", "t", "s", "c"),
                      ("a", "n", "t", "6s+j", "c"), "b", "j")
        tiles = n * th * tw
        v = _collapse(v, [[0, 1], [2, 3, 4], [5]], [ALPHA * ALPHA, tiles, c])
        u = _collapse(u, [[0, 1], [2], [3]], [ALPHA * ALPHA, c, k])
        zero = arith.constant(f32, ir.FloatAttr.get(f32, 0.0))
        products = linalg.fill(zero, outs=[tensor.empty([ALPHA * ALPHA, tiles, k], f32)])
        m = linalg.batch_matmul(v, u, outs=[products])
        m = tensor.ExpandShapeOp(ir.RankedTensorType.get([ALPHA, ALPHA, n, th, tw, k], f32), m,
                                 _reassociation([[0, 1], [2, 3, 4], [5]]), [], [ALPHA, ALPHA, n, th, tw, k]).result
        z = _contract(_matrix(at), m, [OUTPUT_TILE, ALPHA, n, th, tw, k], ("p", "b", "n", "t", "s", "k"),
                      ("a", "b", "n", "t", "s", "k"), "p", "a")
        y = _contract(_matrix(at), z, [n, th, OUTPUT_TILE, tw, OUTPUT_TILE, k], ("n", "t", "p", "s", "q", "k"),
                      ("p", "b", "n", "t", "s", "k"), "q", "b")
        y = _collapse(y, [[0], [1, 2], [3, 4], [5]], [n, OUTPUT_TILE * th, OUTPUT_TILE * tw, k])
        y = tensor.extract_slice(ir.RankedTensorType.get([n, oh, ow, k], f32), y, [], [], [], [0, 0, 0, 0],
                                 [n, oh, ow, k], [1, 1, 1, 1])
        result = y if is_zeros(init) else add_elementwise(init, y)
    op.results[0].replace_all_uses_with(result)
    op.erase()


def _matrix(values: np.ndarray) -> ir.Value:
    f32 = ir.F32Type.get()
    array = np.ascontiguousarray(values, dtype=np.float32)
    attr = ir.DenseElementsAttr.get(array, type=ir.RankedTensorType.get(list(array.shape), f32))
    return arith.constant(ir.RankedTensorType.get(list(array.shape), f32), attr)


def _contract(matrix: ir.Value, value: ir.Value, shape: Sequence[int], out: Sequence[str], read: Sequence[str],
              row: str, tap: str) -> ir.Value:
    """`result[out] = sum over tap of matrix[row, tap] * value[read]`: one dimension of a transform, as a generic
    whose loops are `out`'s then `tap` (a reduction). An index of `read` may be `6t+i`: tile `t`, tap `i`."""
    loops = [*out, tap]
    position = {name: index for index, name in enumerate(loops)}

    def expr(term: str) -> ir.AffineExpr:
        if "+" not in term:
            return ir.AffineDimExpr.get(position[term])
        scaled, offset = term.split("+")
        return ir.AffineDimExpr.get(position[scaled[1:]]) * int(scaled[0]) + ir.AffineDimExpr.get(position[offset])

    maps = [ir.AffineMap.get(len(loops), 0, [expr(row), expr(tap)]),
            ir.AffineMap.get(len(loops), 0, [expr(t) for t in read]),
            ir.AffineMap.get(len(loops), 0, [expr(t) for t in out])]
    f32 = ir.F32Type.get()
    zero = arith.constant(f32, ir.FloatAttr.get(f32, 0.0))
    init = linalg.fill(zero, outs=[tensor.empty(list(shape), f32)])
    iterators = [linalg.IteratorType.parallel] * len(out) + [linalg.IteratorType.reduction]
    op = linalg.GenericOp([init.type], [matrix, value], [init], maps, iterators)
    block = op.regions[0].blocks.append(f32, f32, f32)
    with ir.InsertionPoint(block):
        a, b, acc = block.arguments
        linalg.yield_([arith.addf(acc, arith.mulf(a, b))])
    return op.result


def _reassociation(groups: Sequence[Sequence[int]]) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in group]) for group in groups])


def _collapse(value: ir.Value, groups: Sequence[Sequence[int]], shape: Sequence[int]) -> ir.Value:
    result = ir.RankedTensorType.get(list(shape), ir.RankedTensorType(value.type).element_type)
    return tensor.CollapseShapeOp(result, value, _reassociation(groups)).result

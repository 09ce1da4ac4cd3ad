"""Building blocks of the convolution rewrites (`phase_decomposition`, `border_split`): reading a
multiply-accumulate body, zero tensors and index gathers (importers' filter flips), and making slices, zero pads,
flips, transposes and constants.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import arith, linalg, tensor

from ansor_mlir.mlir.context import producer

CASTS = frozenset({"arith.extf", "arith.extsi", "arith.extui", "arith.sitofp", "arith.uitofp", "arith.truncf"})
MULTIPLIES = frozenset({"arith.mulf", "arith.muli"})
ADDS = frozenset({"arith.addf", "arith.addi"})
# The ops a gather's body may hold: index arithmetic, one extract and its yield (anything else computes more).
GATHER_BODY = frozenset({"linalg.index", "arith.constant", "arith.subi", "tensor.extract", "linalg.yield"})
# Ops that made a rewritten op's operands, erased once nothing reads them.
ERASABLE = frozenset({"tensor.pad", "tensor.insert_slice", "linalg.fill", "tensor.empty", "arith.constant"})


def pads_with_zero(pad: ir.Operation) -> bool:
    block = pad.regions[0].blocks[0]
    yielded = list(block.operations)[-1].operands
    return len(yielded) == 1 and is_zero_scalar(yielded[0])


def is_zeros(value: ir.Value) -> bool:
    """A tensor of zeros: a `linalg.fill` of a zero constant, or a zero splat constant."""
    op = producer(value)
    if op is None:
        return False
    if op.name == "linalg.fill":
        return is_zero_scalar(op.operands[0])
    if op.name == "arith.constant":
        attr = op.attributes["value"]
        return isinstance(attr, ir.DenseElementsAttr) and attr.is_splat and zero_attr(attr.get_splat_value())
    return False


def is_zero_scalar(value: ir.Value) -> bool:
    op = producer(value)
    return op is not None and op.name == "arith.constant" and zero_attr(op.attributes["value"])


def zero_attr(attr: ir.Attribute) -> bool:
    if isinstance(attr, ir.FloatAttr):
        return attr.value == 0.0
    if isinstance(attr, ir.IntegerAttr):
        return attr.value == 0
    return False


def multiplies_and_accumulates(op: ir.Operation) -> bool:
    """The body is `acc + x * w` (operands possibly cast): an input of zero adds nothing."""
    if len(op.regions) != 1 or len(op.regions[0].blocks) != 1:
        return False
    block = op.regions[0].blocks[0]
    if len(block.arguments) != 3:
        return False
    body = list(block.operations)
    if not body or len(body[-1].operands) != 1:
        return False
    add = producer(body[-1].operands[0])
    if add is None or add.name not in ADDS:
        return False
    acc = block.arguments[2]
    lhs, rhs = add.operands
    product = rhs if lhs == acc else lhs if rhs == acc else None
    mul = producer(product) if product is not None else None
    if mul is None or mul.name not in MULTIPLIES:
        return False
    factors = {through_casts(v) for v in mul.operands}
    return factors == {block.arguments[0], block.arguments[1]} and all(
        o.name in CASTS | MULTIPLIES | ADDS | {body[-1].name} for o in body)


def through_casts(value: ir.Value) -> ir.Value:
    op = producer(value)
    while op is not None and op.name in CASTS:
        value = op.operands[0]
        op = producer(value)
    return value


def static_tensor(t: ir.Type) -> ir.RankedTensorType | None:
    return t if isinstance(t, ir.RankedTensorType) and t.has_static_shape else None


def erase_unused(op: ir.Operation) -> None:
    """Erase `op` (a pad, fill, empty tensor or zero insertion a rewrite stopped reading) once nothing reads it, and
    what it alone read."""
    if op.name not in ERASABLE or any(True for r in op.results for _ in r.uses):
        return
    operands = [producer(v) for v in op.operands]
    op.erase()
    for dead in operands:
        if dead is not None:
            erase_unused(dead)


def slice_of(value: ir.Value, offsets: Sequence[int], sizes: Sequence[int], strides: Sequence[int]) -> ir.Value:
    """A static `tensor.extract_slice` of `value`; `value` itself when the slice is all of it."""
    value_type = ir.RankedTensorType(value.type)
    if list(offsets) == [0] * value_type.rank and list(sizes) == list(value_type.shape) and set(strides) <= {1}:
        return value
    result = ir.RankedTensorType.get(list(sizes), value_type.element_type)
    return tensor.extract_slice(result, value, [], [], [], offsets, sizes, strides)


def pad_with_zeros(value: ir.Value, low: Sequence[int], high: Sequence[int],
                   zeros: dict[ir.Type, ir.Value]) -> ir.Value:
    """`value` padded with zeros (`low`, `high` per dimension); `value` itself when nothing is padded."""
    if not any(low) and not any(high):
        return value
    value_type = ir.RankedTensorType(value.type)
    shape = [n + a + b for n, a, b in zip(value_type.shape, low, high, strict=True)]
    zero = zero_constant(value_type.element_type, zeros)
    pad = tensor.PadOp(ir.RankedTensorType.get(shape, value_type.element_type), value, [], [], low, high)
    block = pad.regions[0].blocks.append(*[ir.IndexType.get()] * value_type.rank)
    with ir.InsertionPoint(block):
        tensor.yield_(zero)
    return pad.result


def zero_constant(element: ir.Type, zeros: dict[ir.Type, ir.Value]) -> ir.Value:
    """One zero constant per element type for the whole rewrite of an op (made before its first use)."""
    if element not in zeros:
        attr = ir.IntegerAttr.get(element, 0) if isinstance(element, ir.IntegerType) else ir.FloatAttr.get(element, 0.0)
        zeros[element] = arith.constant(element, attr)
    return zeros[element]


def elementwise(inputs: Sequence[ir.Value], body: Callable[..., ir.Value]) -> ir.Value:
    """`body` of the inputs' elements, element by element (a `linalg.generic` with identity maps over the first
    input's shape); `body` builds the yielded value from the block's input arguments."""
    result_type = ir.RankedTensorType(inputs[0].type)
    identity = ir.AffineMap.get_identity(result_type.rank)
    op = linalg.GenericOp([result_type], list(inputs),
                          [tensor.empty(list(result_type.shape), result_type.element_type)],
                          [identity] * (len(inputs) + 1), [linalg.IteratorType.parallel] * result_type.rank)
    block = op.regions[0].blocks.append(*[result_type.element_type] * (len(inputs) + 1))
    with ir.InsertionPoint(block):
        linalg.yield_([body(*list(block.arguments)[:len(inputs)])])
    return op.result


def add_elementwise(lhs: ir.Value, rhs: ir.Value) -> ir.Value:
    """`lhs + rhs`, element by element."""
    add = arith.addi if isinstance(ir.RankedTensorType(lhs.type).element_type, ir.IntegerType) else arith.addf
    return elementwise([lhs, rhs], add)


@dataclass(frozen=True)
class Gather:
    """`result[i] = source[j]` with `j[a] = i[positions[a]]`, or `extent - 1 - i[positions[a]]` where `reversed[a]`:
    a transpose and flip written as a generic of `tensor.extract`s (how importers flip a transposed convolution's
    filter)."""

    op: ir.Operation
    source: ir.Value
    positions: tuple[int, ...]
    reversed: tuple[bool, ...]

    def reversed_dims(self) -> frozenset[int]:
        """The result dimensions read back to front."""
        return frozenset(p for p, r in zip(self.positions, self.reversed, strict=True) if r)


def read_gather(value: ir.Value) -> Gather | None:
    """The gather that makes `value`: an all-parallel, input-less generic with an identity output map whose body
    yields `source[...]` at indices that are loop indices or `extent - 1 -` loop indices, one per loop."""
    op = producer(value)
    if op is None or op.name != "linalg.generic" or len(op.results) != 1 or len(op.operands) != 1:
        return None
    result = static_tensor(op.results[0].type)
    maps = linalg.get_indexing_maps(op)
    if result is None or len(maps) != 1:
        return None
    if ir.AffineMapAttr(maps[0]).value != ir.AffineMap.get_identity(result.rank, op.context):
        return None
    body = list(op.regions[0].blocks[0].operations)
    if any(o.name not in GATHER_BODY for o in body) or len(body[-1].operands) != 1:
        return None
    extract = producer(body[-1].operands[0])
    if extract is None or extract.name != "tensor.extract":
        return None
    source, made_by = static_tensor(extract.operands[0].type), producer(extract.operands[0])
    if source is None or source.rank != result.rank or (made_by is not None and made_by.parent.operation == op):
        return None
    reads = [_index_read(v) for v in extract.operands[1:]]
    if None in reads:
        return None
    positions, flips = tuple(p for p, _ in reads), tuple(last is not None for _, last in reads)
    if sorted(positions) != list(range(result.rank)):
        return None
    for a, (position, last) in enumerate(reads):
        if source.shape[a] != result.shape[position] or last not in (None, source.shape[a] - 1):
            return None
    return Gather(op, extract.operands[0], positions, flips)


def _index_read(value: ir.Value) -> tuple[int, int | None] | None:
    """(loop, None) for `linalg.index loop`, (loop, c) for `c - linalg.index loop` (c a constant); else None."""
    op = producer(value)
    if op is not None and op.name == "linalg.index":
        return ir.IntegerAttr(op.attributes["dim"]).value, None
    if op is None or op.name != "arith.subi":
        return None
    constant, index = producer(op.operands[0]), producer(op.operands[1])
    if constant is None or constant.name != "arith.constant" or index is None or index.name != "linalg.index":
        return None
    return ir.IntegerAttr(index.attributes["dim"]).value, ir.IntegerAttr(constant.attributes["value"]).value


def flip(value: ir.Value, dims: Sequence[int]) -> ir.Value:
    """`value` read back to front along `dims`: a gather generic (IREE's tiling rejects the reversed indexing map
    `(d0) -> (-d0 + n)` that would say the same)."""
    value_type = ir.RankedTensorType(value.type)
    rank, element = value_type.rank, value_type.element_type
    op = linalg.GenericOp([value_type], [], [tensor.empty(list(value_type.shape), element)],
                          [ir.AffineMap.get_identity(rank)], [linalg.IteratorType.parallel] * rank)
    block = op.regions[0].blocks.append(element)
    index = ir.IndexType.get()
    with ir.InsertionPoint(block):
        indices = [linalg.IndexOp(d).result for d in range(rank)]
        for d in dims:
            last = arith.constant(index, ir.IntegerAttr.get(index, value_type.shape[d] - 1))
            indices[d] = arith.subi(last, indices[d])
        linalg.yield_([tensor.extract(value, indices)])
    return op.result


def transpose_of(gather: Gather) -> ir.Value:
    """The gather's source in the gather's dimension order, nothing reversed (`linalg.transpose`; the source
    itself when the order is its own)."""
    if gather.positions == tuple(range(len(gather.positions))):
        return gather.source
    result_type = ir.RankedTensorType(gather.op.results[0].type)
    permutation = [0] * len(gather.positions)
    for a, position in enumerate(gather.positions):
        permutation[position] = a
    init = tensor.empty(list(result_type.shape), result_type.element_type)
    transposed = linalg.transpose(gather.source, outs=[init], permutation=permutation)
    return transposed if isinstance(transposed, ir.Value) else transposed.results[0]

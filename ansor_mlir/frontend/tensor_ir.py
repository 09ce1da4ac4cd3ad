"""Building blocks of the convolution rewrites (`phase_decomposition`, `border_split`): reading a
multiply-accumulate body and zero tensors, and making slices, zero pads and constants.
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir
from iree.compiler.dialects import arith, linalg, tensor

from ansor_mlir.mlir.context import producer

CASTS = frozenset({"arith.extf", "arith.extsi", "arith.extui", "arith.sitofp", "arith.uitofp", "arith.truncf"})
MULTIPLIES = frozenset({"arith.mulf", "arith.muli"})
ADDS = frozenset({"arith.addf", "arith.addi"})
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


def add_elementwise(lhs: ir.Value, rhs: ir.Value) -> ir.Value:
    """`lhs + rhs`, element by element (a `linalg.generic` with identity maps)."""
    result_type = ir.RankedTensorType(lhs.type)
    identity = ir.AffineMap.get_identity(result_type.rank)
    op = linalg.GenericOp([result_type], [lhs, rhs], [tensor.empty(list(result_type.shape), result_type.element_type)],
                          [identity] * 3, [linalg.IteratorType.parallel] * result_type.rank)
    block = op.regions[0].blocks.append(*[result_type.element_type] * 3)
    with ir.InsertionPoint(block):
        add = arith.addi if isinstance(result_type.element_type, ir.IntegerType) else arith.addf
        linalg.yield_([add(block.arguments[0], block.arguments[1])])
    return op.result

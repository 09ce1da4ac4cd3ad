"""Reciprocal division: a division by a value broadcast along some loops becomes a multiplication by its reciprocal.

A softmax's last generic divides every element of a row by the row's sum. A
vector division costs about ten times a multiplication (`vdivps` issues once
per 8-16 cycles where `vmulps` issues twice per cycle): the division's
dispatch spends most of its time dividing (measured:
docs/reports/program_rewrites.md), and no schedule of that task can make the
divisions cheaper. One reciprocal per
divisor element, then a multiplication per element, is what PyTorch's and
oneDNN's softmax kernels do.

`x / d` and `x * (1 / d)` round differently: the product is within about two
units in the last place of the quotient, which every output check here
(relative 2e-3) accepts but a program that needs IEEE division does not, so
the rewrite is opt-in (`rewrites=...+reciprocal-division`).

The match reads loop structure and body dataflow: an all-parallel
`linalg.generic` over static shapes whose body divides by an input read
through a projected permutation of fewer loops than the generic has, each of
its elements reused at least `MIN_REUSE` times, and whose body uses that
input only as a divisor. The reciprocals become an elementwise generic over
the divisor's shape, inserted before the generic, which reads them in its
place and multiplies.
"""

from __future__ import annotations

import math

from iree.compiler import ir
from iree.compiler.dialects import arith

from ansor_mlir.frontend.affine_maps import loop_structure
from ansor_mlir.frontend.tensor_ir import elementwise, static_tensor
from ansor_mlir.mlir.context import walk

NAME = "reciprocal-division"

DIVIDE = "arith.divf"
# Uses of each divisor element at least: below it the reciprocals cost about what the divisions did.
MIN_REUSE = 4


def divide_by_reciprocals(module: ir.Module) -> int:
    """Rewrite every matching generic's divisions by a broadcast input into multiplications; how many generics."""
    matches = [(op, index) for op in list(walk(module.operation)) for index in _broadcast_divisors(op)]
    for op, index in matches:
        _rewrite(op, index)
    return len({id(op) for op, _ in matches})


def _broadcast_divisors(op: ir.Operation) -> list[int]:
    """Indices of the inputs `op` (a generic) only divides by and reads broadcast, each element reused enough."""
    if op.name != "linalg.generic" or len(op.regions) != 1:
        return []
    generic = op.opview
    inputs, outputs = list(generic.inputs), list(generic.outputs)
    if any(static_tensor(v.type) is None for v in (*inputs, *outputs)):
        return []
    structure = loop_structure(op)
    if set(structure["iterators"]) != {"parallel"} or 0 in structure["extents"]:
        return []
    body = op.regions[0].blocks[0]
    maps = [ir.AffineMapAttr(m).value for m in generic.indexing_maps]
    loops = math.prod(structure["extents"])
    found = []
    for index, value in enumerate(inputs):
        amap, arg = maps[index], body.arguments[index]
        elements = math.prod(ir.RankedTensorType(value.type).shape)
        if not amap.is_projected_permutation or len(amap.results) >= amap.n_dims or loops < MIN_REUSE * elements:
            continue
        uses = [_user(use) for use in arg.uses]
        if uses and all(u.name == DIVIDE and u.operands[1] == arg and u.operands[0] != arg for u in uses):
            found.append(index)
    return found


def _user(use: ir.OpOperand) -> ir.Operation:
    owner = use.owner
    return owner.operation if isinstance(owner, ir.OpView) else owner


def _rewrite(op: ir.Operation, index: int) -> None:
    """The generic reads `1 / divisor` (a new generic before it) at input `index` and multiplies by it."""
    divisor = op.operands[index]
    with ir.InsertionPoint(op), op.location:
        op.operands[index] = _reciprocals(divisor)
    arg = op.regions[0].blocks[0].arguments[index]
    for division in [_user(use) for use in arg.uses]:
        with ir.InsertionPoint(division), division.location:
            product = arith.mulf(division.operands[0], arg)
        division.results[0].replace_all_uses_with(product)
        division.erase()


def _reciprocals(value: ir.Value) -> ir.Value:
    """`1 / value`, element by element."""
    element = ir.RankedTensorType(value.type).element_type
    return elementwise([value], lambda x: arith.divf(arith.constant(element, ir.FloatAttr.get(element, 1.0)), x))

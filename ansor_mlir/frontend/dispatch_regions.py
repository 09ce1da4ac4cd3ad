"""Dispatches formed ahead of IREE: `flow.dispatch.region`s written into linalg programs and tasks.

IREE keeps a `flow.dispatch.region` it finds in its input as one dispatch.
A program rewrite uses that to put ops IREE would split apart (a `tensor.pad`
and the convolution reading it) into one dispatch; a task rebuilt from such a
dispatch is wrapped the same way, so every build of the task (sketch zero,
candidates, the cost model's flow) forms the dispatch the program formed.
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir

from ansor_mlir.mlir.context import ancestors, new_context, ops_of, parse_module

REGION = "flow.dispatch.region"
# Ops IREE's dispatch formation gives a dispatch of their own unless a region holds them with their consumer.
SPLIT_BY_IREE = frozenset({"tensor.pad"})


def wrap_in_dispatch_region(ops: Sequence[ir.Operation], results: Sequence[ir.Value]) -> list[ir.Value]:
    """Move `ops` (in block order, the last one last) into one `flow.dispatch.region` yielding `results`.

    The region takes the last op's place, so every value the ops read from
    outside still dominates it; only `results` may be used outside the ops.
    Returns the region's results, which replace `results` everywhere outside.
    """
    last = ops[-1]
    with last.context, last.location:
        region_op = ir.Operation.create(REGION, results=[v.type for v in results], operands=[],
                                        attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([0, 0])},
                                        regions=2, ip=ir.InsertionPoint(last))
        body = region_op.regions[0].blocks.append()
        for op in ops:
            op.detach_from_parent()
            ir.InsertionPoint(body).insert(op)
        ir.Operation.create("flow.return", operands=list(results), ip=ir.InsertionPoint(body))
    for value, replacement in zip(results, region_op.results, strict=True):
        for use in list(value.uses):
            if region_op not in ancestors(use.owner):
                use.owner.operands[use.operand_number] = replacement
    return list(region_op.results)


def as_one_dispatch(func_text: str, what: str) -> str:
    """A task function whose body holds an op IREE would split off, with its body in one dispatch region.

    Other functions come back unchanged (their text, and so their keys, stay as they were).
    """
    module = parse_module(func_text, what, new_context())
    func = module.body.operations[0].operation
    block = func.regions[0].blocks[0]
    body = ops_of(block)
    if not any(op.name in SPLIT_BY_IREE for op in body) or any(op.name == REGION for op in body):
        return func_text
    returned = body[-1]
    wrap_in_dispatch_region(body[:-1], list(returned.operands))
    return str(func)

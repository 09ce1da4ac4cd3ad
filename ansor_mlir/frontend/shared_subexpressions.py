"""Shared subexpressions: an expensive elementwise value two generics both compute is computed once.

A softmax written as generics (max; sum of `exp(x - max)`; `exp(x - max) / sum`)
computes every `exp` twice: once in the sum's body and again in the
division's. IREE forms two dispatches and keeps both computations, and no
schedule of either task can remove the other's: the `exp`s are most of the
work. Computed once, into a tensor the size of the output the division
writes anyway, they make even IREE's own build of a softmax faster, before
any tuning (measured: docs/reports/program_rewrites.md).

The match reads loop structure and body dataflow, never op names: two or
more `linalg.generic`s of one block over the same static loop ranges whose
bodies compute the same value from the same input tensors read through the
same indexing maps, where that value costs a `math` op (a transcendental)
and one of the generics is all-parallel and writes a tensor the size of the
loop domain (so the new tensor is no larger than what the program already
writes). The value becomes an elementwise generic of its own, inserted
before the first of them; each of them reads it instead of computing it.
Where that first one reduces and the others are all-parallel (the softmax's
sum, then its division), the reduction writes the value as a second result
instead: IREE puts it in one dispatch with its elementwise readers, where a
generic of its own went into the dispatch before and wrote the value out for
the next one to read back (with reassociated reductions,
`core.target.codegen_flags`; measured: docs/reports/program_rewrites.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import linalg, tensor

from ansor_mlir.frontend.affine_maps import loop_structure
from ansor_mlir.mlir.context import ops_of, producer, walk

NAME = "shared-subexpressions"

GENERIC = "linalg.generic"
YIELD = "linalg.yield"
# Math ops that cost a call or a polynomial per element; the cheap ones (abs, fma, rounding) are not worth a tensor.
CHEAP_MATH = frozenset({"math.absf", "math.absi", "math.copysign", "math.fma", "math.ceil", "math.floor",
                        "math.round", "math.roundeven", "math.trunc"})
# Iterations at most: a group found and rewritten per pass, each removing at least one duplicate.
MAX_GROUPS = 64


def share_subexpressions(module: ir.Module) -> int:
    """Compute every shared expensive elementwise value once; returns how many generics now read one."""
    rewritten = 0
    for _ in range(MAX_GROUPS):
        group = next(_groups(module), None)
        if group is None:
            break
        rewritten += _rewrite(group)
    return rewritten


@dataclass(frozen=True)
class _Use:
    """One generic's computation of a shared value: the generic and the body value."""

    generic: linalg.GenericOp
    value: ir.Value


def _groups(module: ir.Module) -> Iterator[list[_Use]]:
    """Groups of generics of one block computing the same expensive value (at least one writes its domain)."""
    by_block: dict[ir.Block, list[linalg.GenericOp]] = {}
    for op in walk(module.operation):
        if op.name == GENERIC and _static(op.opview):
            by_block.setdefault(op.operation.block, []).append(op.opview)
    for generics in by_block.values():
        found: dict[tuple, list[_Use]] = {}
        for generic in generics:
            for key, value in _shareable_values(generic).items():
                found.setdefault(key, []).append(_Use(generic, value))
        groups = [(key, uses) for key, uses in found.items()
                  if len(uses) > 1 and any(_writes_its_domain(use.generic) for use in uses)]
        # The value most generics share first, the largest of those: its parts are then computed once with it.
        for _, uses in sorted(groups, key=lambda item: (len(item[1]), _size(item[0])), reverse=True):
            yield uses


def _shareable_values(generic: linalg.GenericOp) -> dict[tuple, ir.Value]:
    """Key -> value for the body's values computed from inputs only and costing a math op."""
    body = generic.regions[0].blocks[0]
    ranges = _loop_ranges(generic)
    maps = list(generic.indexing_maps)
    inputs = list(generic.inputs)
    keys: dict[ir.Value, tuple | None] = {}
    for i, arg in enumerate(body.arguments):
        keys[arg] = ("input", inputs[i], str(maps[i]), ranges) if i < len(inputs) else None
    expensive: dict[ir.Value, bool] = {arg: False for arg in body.arguments}
    candidates: list[ir.Value] = []
    for op in ops_of(body):
        if op.name == YIELD:
            continue
        operand_keys = tuple(_operand_key(v, keys) for v in op.operands)
        pure = len(op.regions) == 0 and op.name.split(".")[0] in ("arith", "math")
        costly = op.name.startswith("math.") and op.name not in CHEAP_MATH
        for index, result in enumerate(op.results):
            ok = pure and None not in operand_keys
            keys[result] = (op.name, _attributes(op), index, operand_keys) if ok else None
            expensive[result] = ok and (costly or any(expensive.get(v, False) for v in op.operands))
            if expensive[result]:
                candidates.append(result)
    return {keys[v]: v for v in reversed(candidates)}


def _size(key: tuple | str | ir.Value) -> int:
    """How many ops and leaves a value's key spans."""
    return 1 + sum(_size(part) for part in key if isinstance(part, tuple)) if isinstance(key, tuple) else 1


def _operand_key(value: ir.Value, keys: dict[ir.Value, tuple | None]) -> tuple | None:
    if value in keys:
        return keys[value]
    owner = producer(value)
    if owner is not None and owner.name == "arith.constant":
        return ("constant", str(owner.attributes["value"]))
    return None  # another value from outside the body: it may not dominate the new generic


def _attributes(op: ir.Operation) -> str:
    return ",".join(sorted(f"{name}={op.attributes[name]}" for name in op.attributes))


def _static(generic: linalg.GenericOp) -> bool:
    types = [v.type for v in (*generic.inputs, *generic.outputs)]
    return all(isinstance(t, ir.RankedTensorType) and ir.RankedTensorType(t).has_static_shape for t in types) \
        and _loop_ranges(generic) is not None


def _loop_ranges(generic: linalg.GenericOp) -> tuple[int, ...] | None:
    """Each loop's trip count (`loop_structure`); None if some loop is not indexed alone by an operand."""
    extents = loop_structure(generic.operation)["extents"]
    return None if 0 in extents else extents


def _maps(generic: linalg.GenericOp) -> list[ir.AffineMap]:
    """The generic's indexing maps, inputs' then outputs', as the bindings' maps (to build with)."""
    return [ir.AffineMapAttr(m).value for m in generic.indexing_maps]


def _writes_its_domain(generic: linalg.GenericOp) -> bool:
    """All loops parallel and an output indexed by all of them: the program writes a domain-sized tensor here."""
    parallel = set(loop_structure(generic.operation)["iterators"]) == {"parallel"}
    return parallel and any(m.is_permutation for m in _maps(generic)[len(generic.inputs):])


def _rewrite(group: Sequence[_Use]) -> int:
    """The shared value as a second result of the group's first generic where that one reduces and the others
    are all-parallel (`_carries`), else as a generic of its own before it; the others read it instead."""
    first = _first_in_block(group)
    others = [use for use in group if use is not first]
    if _carries(first, others):
        with ir.InsertionPoint(first.generic.operation), first.generic.location:
            shared = _with_value_written(first)
        readers = others
    else:
        with ir.InsertionPoint(first.generic.operation), first.generic.location:
            shared = _materialize(first)
        readers = list(group)
    for use in readers:
        with ir.InsertionPoint(use.generic.operation), use.generic.location:
            _read_instead(use, shared)
    return len(group)


def _carries(first: _Use, others: Sequence[_Use]) -> bool:
    """`first` reduces and every other generic is all-parallel: the reduction writes the value as it computes it,
    and IREE puts it in one dispatch with its elementwise readers, so the value never leaves that dispatch (a
    generic of its own fused into the dispatch before the reduction's, and was written out and read back)."""
    iterators = set(loop_structure(first.generic.operation)["iterators"])
    return "reduction" in iterators and all(
        set(loop_structure(use.generic.operation)["iterators"]) == {"parallel"} for use in others)


def _with_value_written(use: _Use) -> ir.Value:
    """`use.generic` replaced by one that also writes `use.value` over its whole loop domain (an extra output,
    identity map, after the others); returns that result."""
    generic = use.generic
    body = generic.regions[0].blocks[0]
    ranges = _loop_ranges(generic)
    element = use.value.type
    n_results = len(generic.results)
    identity = ir.AffineMap.get_identity(len(ranges))
    new = linalg.GenericOp([*(r.type for r in generic.results), ir.RankedTensorType.get(list(ranges), element)],
                           list(generic.inputs), [*generic.outputs, tensor.empty(list(ranges), element)],
                           [*_maps(generic), identity], generic.iterator_types)
    block = new.regions[0].blocks.append(*[a.type for a in body.arguments], element)
    mapping = dict(zip(body.arguments, block.arguments, strict=False))
    terminator = next(op for op in ops_of(body) if op.name == YIELD)
    with ir.InsertionPoint(block):
        _clone([op.operation for op in ops_of(body) if op.name != YIELD], mapping)
        linalg.yield_([mapping.get(v, v) for v in terminator.operands] + [mapping[use.value]])
    for old, replacement in zip(generic.results, list(new.results)[:n_results], strict=True):
        old.replace_all_uses_with(replacement)
    generic.operation.erase()
    return new.results[n_results]


def _first_in_block(group: Sequence[_Use]) -> _Use:
    members = {use.generic.operation: use for use in group}
    block = group[0].generic.operation.block
    return next(members[op.operation] for op in ops_of(block) if op.operation in members)


def _materialize(use: _Use) -> ir.Value:
    """An all-parallel generic computing `use.value` over the loop domain, reading the inputs it needs."""
    generic = use.generic
    body = generic.regions[0].blocks[0]
    live = _live_ops([use.value], body)
    args = _args_read(live, body, len(generic.inputs))
    maps = _maps(generic)
    ranges = _loop_ranges(generic)
    element = use.value.type
    result_type = ir.RankedTensorType.get(list(ranges), element)
    identity = ir.AffineMap.get_identity(len(ranges))
    new = linalg.GenericOp([result_type], [generic.inputs[i] for i in args], [tensor.empty(list(ranges), element)],
                           [maps[i] for i in args] + [identity],
                           [linalg.IteratorType.parallel] * len(ranges))
    block = new.regions[0].blocks.append(*[body.arguments[i].type for i in args], element)
    mapping = {body.arguments[i]: block.arguments[k] for k, i in enumerate(args)}
    with ir.InsertionPoint(block):
        _clone(live, mapping)
        linalg.yield_([mapping[use.value]])
    return new.result


def _read_instead(use: _Use, shared: ir.Value) -> None:
    """Replace `use.generic` with one that reads `shared` (identity map) where it computed `use.value`."""
    generic = use.generic
    body = generic.regions[0].blocks[0]
    n_inputs = len(generic.inputs)
    terminator = next(op for op in ops_of(body) if op.name == YIELD)
    live = _live_ops(list(terminator.operands), body, stop=use.value)
    args = _args_read(live, body, n_inputs)
    maps = _maps(generic)
    n_loops = maps[0].n_dims
    new = linalg.GenericOp([r.type for r in generic.results], [*(generic.inputs[i] for i in args), shared],
                           list(generic.outputs),
                           [*(maps[i] for i in args), ir.AffineMap.get_identity(n_loops), *maps[n_inputs:]],
                           generic.iterator_types)
    outputs = list(body.arguments)[n_inputs:]
    block = new.regions[0].blocks.append(*[body.arguments[i].type for i in args], use.value.type,
                                         *[a.type for a in outputs])
    new_args = list(block.arguments)
    mapping = {body.arguments[i]: new_args[k] for k, i in enumerate(args)}
    mapping[use.value] = new_args[len(args)]
    mapping.update(zip(outputs, new_args[len(args) + 1:], strict=True))
    with ir.InsertionPoint(block):
        _clone([*live, terminator], mapping)
    for old, replacement in zip(generic.results, new.results, strict=True):
        old.replace_all_uses_with(replacement)
    generic.operation.erase()


def _live_ops(roots: Sequence[ir.Value], body: ir.Block, stop: ir.Value | None = None) -> list[ir.Operation]:
    """The body ops `roots` depend on, in body order, not looking past `stop`."""
    pending = list(roots)
    needed: set[ir.Value] = set()
    while pending:
        value = pending.pop()
        if value in needed or (stop is not None and value == stop):
            continue
        needed.add(value)
        owner = producer(value)
        if owner is not None and owner.block == body:
            pending.extend(owner.operands)
    return [op.operation for op in ops_of(body)
            if op.name != YIELD and any(r in needed for r in op.results)]


def _args_read(live: Sequence[ir.Operation], body: ir.Block, n_inputs: int) -> list[int]:
    """Indices of the input block arguments the ops read."""
    read = {v for op in live for v in op.operands}
    return [i for i in range(n_inputs) if body.arguments[i] in read]


def _clone(ops: Sequence[ir.Operation], mapping: dict[ir.Value, ir.Value]) -> None:
    """Clone `ops` at the insertion point, operands remapped through (and results added to) `mapping`."""
    for op in ops:
        copy = op.clone()
        for index, operand in enumerate(op.operands):
            if operand in mapping:
                copy.operands[index] = mapping[operand]
        for old, new in zip(op.results, copy.results, strict=True):
            mapping[old] = new

"""Partition a linalg module into tasks the way IREE does: one per dispatch.

We ask IREE itself (`--compile-to=flow`) which dispatches it forms, rebuild
each dispatch body as a standalone function on tensors (loads become
arguments, stores become results), de-duplicate them by a structural key and
weight each by how often the model dispatches it. IREE's own configuration of
each task (`--compile-to=executable-configurations`) becomes sketch zero.
Everything is read from the IR through the bindings' typed objects (types,
attributes, affine maps), never by matching printed IR.
"""

from __future__ import annotations

import hashlib
import warnings
from collections import Counter
from collections.abc import Sequence
from math import prod

from iree.compiler import ir
from iree.compiler.dialects import arith, linalg, tensor
from iree.compiler.dialects import func as func_dialect

from ansor_mlir.core.target import Target
from ansor_mlir.core.task import IreeConfig, LinalgOpInfo, RootOp, Task
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.affine_maps import loop_structure
from ansor_mlir.frontend.dispatch_regions import as_one_dispatch
from ansor_mlir.mlir.context import ancestors, new_context, ops_of, parse_module, producer, walk
from ansor_mlir.mlir.iree_attributes import cpu_lowering_levels, cpu_pipeline
from ansor_mlir.mlir.iree_compiler import compile_to_phase, first_error_line, run_tool

LOAD = "iree_tensor_ext.dispatch.tensor.load"
STORE = "iree_tensor_ext.dispatch.tensor.store"
DISPATCH = "flow.dispatch"
INITIALIZER = "util.initializer"
STRUCTURAL_SKIP = {"linalg.fill", "linalg.yield", "linalg.index"}
ARITH_PREFIXES = ("arith.", "math.")
# `flow.dispatch` operand segments: workload, arguments, argument dims, result dims.
DISPATCH_ARGUMENTS = 1


def validate_input(text: str, what: str) -> None:
    """Reject input we cannot tune before IREE sees it."""
    module = parse_module(text, what)
    funcs = [op for op in ops_of(module.body) if op.name in ("func.func", "util.func")]
    if not funcs:
        raise AnsorError(f"{what}: no func.func to tune")
    for func in funcs:
        ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        if any(isinstance(t, ir.ShapedType) and not t.has_static_shape for t in [*ftype.inputs, *ftype.results]):
            name = ir.StringAttr(func.attributes["sym_name"]).value
            raise AnsorError(
                f"{what}: function {name} has dynamic shapes ({ftype}): "
                "only static shapes can be tuned"
            )
        empty = [t for t in [*ftype.inputs, *ftype.results] if isinstance(t, ir.ShapedType) and 0 in t.shape]
        if empty:
            name = ir.StringAttr(func.attributes["sym_name"]).value
            raise AnsorError(f"{what}: function {name} has a zero-size tensor ({empty[0]}): nothing to compute, "
                             "nothing to tune; give every dimension an extent of at least 1")


def workload_key(func_text: str) -> str:
    """A structural key: same computation, same key, whatever module it came from."""
    return hashlib.sha256(func_text.encode()).hexdigest()[:16]


def extract_tasks(text: str, target: Target, what: str = "<input>") -> list[Task]:
    """All unique, weighted tasks of a linalg module, in first-dispatch order."""
    validate_input(text, what)
    flow = compile_to_phase(text, target.compile_flags(), "flow", what)
    return tasks_from_flow(flow, target, what)


def tasks_from_flow(flow_text: str, target: Target, what: str) -> list[Task]:
    ctx = new_context()
    module = parse_module(flow_text, f"{what} (IREE flow output)", ctx)
    sites = dispatch_sites(module.operation)
    counts = Counter(_executable_of(site) for site in sites if not in_initializer(site))
    by_key: dict[str, Task] = {}
    for exe in ops_of(module.body):
        if exe.name != "flow.executable":
            continue
        exe_name = ir.StringAttr(exe.attributes["sym_name"]).value
        try:
            dispatch = canonical_dispatch(dispatch_function(exe), _binding_types(exe_name, sites))
        except AnsorError as exc:  # one dispatch that cannot be rebuilt keeps IREE's configuration; the rest tune
            warnings.warn(f"{what}: {exe_name} is not tuned: {exc}", stacklevel=2)
            continue
        task = task_from_dispatch(dispatch, exe_name, target, ctx) if dispatch else None
        if task is None or exe_name not in counts:  # dispatched only while the program loads
            continue
        weight = counts[exe_name]
        if task.key in by_key:
            prev = by_key[task.key]
            by_key[task.key] = prev.with_weight(prev.weight + weight)
        else:
            by_key[task.key] = task.with_weight(weight)
    return list(by_key.values())


def dispatch_function(exe: ir.Operation) -> ir.Operation:
    inner = [op for op in ops_of(exe.regions[0].blocks[0]) if op.name == "builtin.module"][0]
    return [op for op in ops_of(inner.regions[0].blocks[0]) if op.name == "func.func"][0]


def dispatch_sites(module: ir.Operation) -> list[ir.Operation]:
    """The module's `flow.dispatch` ops, in program order."""
    return [op for op in walk(module) if op.name == DISPATCH]


def in_initializer(op: ir.Operation) -> bool:
    """Whether `op` sits in a `util.initializer`: work IREE hoisted out of the program to run once, when it loads
    (math on weights read from parameters, such as folding batch-norm statistics), not on every call."""
    return any(parent.name == INITIALIZER for parent in ancestors(op))


def _executable_of(site: ir.Operation) -> str:
    entry = ir.ArrayAttr(site.attributes["entry_points"])[0]
    return ir.SymbolRefAttr(entry).value[0]


def _binding_types(exe_name: str, sites: Sequence[ir.Operation]) -> list[ir.Type] | None:
    """The tensor type bound to each argument of an executable's function, read off a dispatch of it.

    The function's arguments are the dispatch's arguments, then its results
    that are not tied to an argument (IREE's outlining order). IREE's
    `dispatch.tensor` type has no Python class, so its tensor comes from here.
    """
    for site in sites:
        if _executable_of(site) != exe_name:
            continue
        segments = list(ir.DenseI32ArrayAttr(site.attributes["operandSegmentSizes"]))
        first = sum(segments[:DISPATCH_ARGUMENTS])
        arguments = list(site.operands)[first: first + segments[DISPATCH_ARGUMENTS]]
        tied = [-1] * len(site.results)
        if "tied_operands" in site.attributes:
            tied = [ir.IntegerAttr(t).value for t in ir.ArrayAttr(site.attributes["tied_operands"])]
        return [v.type for v in arguments] + [r.type for r, t in zip(site.results, tied, strict=True) if t < 0]
    return None


def canonical_dispatch(
    func: ir.Operation, bindings: Sequence[ir.Type] | None
) -> tuple[str, str, list[str], list[str]] | None:
    """(key, canonical task text, input types, output types) of a dispatch function."""
    if bindings is None:
        return None
    rebuilt = standalone_function(func, bindings)
    if rebuilt is None:
        return None
    text, input_types, output_types = rebuilt
    return workload_key(text), text, input_types, output_types


def dispatch_executable_key(exe: ir.Operation, ctx: ir.Context) -> str | None:
    """The workload key of a flow.executable (used when applying records)."""
    del ctx  # the executable's own context holds everything needed
    exe_name = ir.StringAttr(exe.attributes["sym_name"]).value
    try:
        dispatch = canonical_dispatch(dispatch_function(exe), _binding_types(exe_name, dispatch_sites(exe.parent)))
    except AnsorError:  # not a task (extraction warned), so no record applies to it
        return None
    return dispatch[0] if dispatch else None


def compute_ops(func: ir.Operation) -> list[ir.Operation]:
    """The linalg ops of a function that do work (fills excluded), in order."""
    return [
        op
        for op in ops_of(func.regions[0].blocks[0])
        if op.name.startswith("linalg.") and op.name not in STRUCTURAL_SKIP
    ]


def standalone_function(func: ir.Operation, bindings: Sequence[ir.Type]) -> tuple[str, list[str], list[str]] | None:
    """Rebuild a dispatch body as `func.func @task(inputs) -> outputs` and print it.

    Built with the bindings in a scratch module of the dispatch's context: a
    whole-tensor load becomes an argument, a partial one an `extract_slice` of
    an argument of the bound tensor; each whole-tensor store becomes a result.
    """
    with func.context, ir.Location.unknown():
        scratch = ir.Module.create()
        body = func.clone(ir.InsertionPoint(scratch.body))
        if len(body.regions[0].blocks[0].arguments) != len(bindings):
            name = ir.StringAttr(func.attributes["sym_name"]).value
            raise AnsorError(f"dispatch {name}: its arguments do not match the tensors its dispatch binds")
        ops = ops_of(body.regions[0].blocks[0])
        inputs: list[ir.Type] = []
        outputs: list[ir.Type] = []
        for op in ops:
            if op.name == LOAD:
                bound, loaded = bindings[_argument_number(op.operands[0])], op.results[0].type
                inputs.append(loaded if bound == loaded and _is_full(op) else bound)
            elif op.name == STORE:
                # A partial store (a result written into a padded buffer for the next op's window) returns the
                # whole buffer, its border zero: IREE then forms the same dispatch (loops not collapsed) as in
                # the program.
                outputs.append(bindings[_argument_number(op.operands[1])])
        if not outputs or not any(op.name.startswith("linalg.") and op.name not in STRUCTURAL_SKIP for op in ops):
            return None
        task = func_dialect.FuncOp("task", (inputs, outputs), ip=ir.InsertionPoint(scratch.body))
        block = task.add_entry_block()
        end = ir.InsertionPoint(block)
        loads = iter(block.arguments)
        results = []
        # Constants first, in one order: IREE hoists a dispatch's constants in an order that depends on the
        # module around it (a task compiled on its own got another key than in its program).
        constants = sorted((op for op in ops if op.name == "arith.constant"), key=_constant_order)
        for op in constants:
            op.detach_from_parent()
            end.insert(op)
        for op in (op for op in ops if op.name != "arith.constant"):
            if op.name == LOAD:
                arg, loaded = next(loads), op.results[0]
                if arg.type != loaded.type:
                    loaded.replace_all_uses_with(_slice(op, arg, end))
                else:
                    loaded.replace_all_uses_with(arg)
                op.erase()
            elif op.name == STORE:
                stored, bound = op.operands[0], bindings[_argument_number(op.operands[1])]
                results.append(stored if stored.type == bound and _is_full(op) else _insert(op, stored, bound, end))
                op.erase()
            elif op.name != "func.return":
                if _reads_block_arguments(op, body.regions[0].blocks[0]):
                    # The op would outlive the bindings it reads (erasing them crashes the bindings).
                    name = ir.StringAttr(func.attributes["sym_name"]).value
                    raise AnsorError(f"dispatch {name}: {op.name} reads a binding other than through a load")
                op.detach_from_parent()
                end.insert(op)
        func_dialect.ReturnOp(results, ip=end)
        body.erase()
        try:
            task.operation.verify()
        except ir.MLIRError as exc:
            name = ir.StringAttr(func.attributes["sym_name"]).value
            raise AnsorError(f"dispatch {name}: cannot rebuild it as a function: {exc}") from None
        return str(task), [str(t) for t in inputs], [str(t) for t in outputs]


def _constant_order(op: ir.Operation) -> tuple[str, str]:
    """Constants by type, then value (printed: the op's own printout numbers it by position)."""
    return str(op.results[0].type), str(op.attributes["value"])


def _reads_block_arguments(op: ir.Operation, block: ir.Block) -> bool:
    """Whether `op`, or an op nested in it, uses an argument of `block`."""
    return any(isinstance(v, ir.BlockArgument) and v.owner == block
               for each in (op, *walk(op)) for v in each.operands)


def _argument_number(value: ir.Value) -> int:
    if not isinstance(value, ir.BlockArgument):
        raise AnsorError("a dispatch loads or stores a value that is not one of its bindings")
    return value.arg_number


def _slice(load: ir.Operation, source: ir.Value, ip: ir.InsertionPoint) -> ir.Value:
    """`tensor.extract_slice` of `source` at the load's static offsets, sizes and strides."""
    return tensor.ExtractSliceOp(
        load.results[0].type, source, [], [], [],
        _array_ints(load, "static_offsets"), _array_ints(load, "static_sizes"), _array_ints(load, "static_strides"),
        ip=ip,
    ).result


def _insert(store: ir.Operation, value: ir.Value, bound: ir.Type, ip: ir.InsertionPoint) -> ir.Value:
    """`tensor.insert_slice` of `value` into zeros of the bound tensor, at the store's static offsets and strides."""
    bound = ir.RankedTensorType(bound)
    element = bound.element_type
    zero = ir.IntegerAttr.get(element, 0) if isinstance(element, ir.IntegerType) else ir.FloatAttr.get(element, 0.0)
    with ip:
        zeros = linalg.fill(arith.constant(element, zero), outs=[tensor.empty(list(bound.shape), element)])
        return tensor.insert_slice(value, zeros, [], [], [], _array_ints(store, "static_offsets"),
                                   _array_ints(store, "static_sizes"), _array_ints(store, "static_strides"))


def _array_ints(op: ir.Operation, attr: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[attr]))


def _is_full(op: ir.Operation) -> bool:
    offsets = _array_ints(op, "static_offsets")
    strides = _array_ints(op, "static_strides")
    return all(o == 0 for o in offsets) and all(s == 1 for s in strides)


def task_from_dispatch(
    dispatch: tuple[str, str, list[str], list[str]], exe_name: str, target: Target, ctx: ir.Context
) -> Task | None:
    key, canonical, input_types, output_types = dispatch
    module = ir.Module.parse(canonical, ctx)
    task_func = module.body.operations[0].operation
    stores_into_slice = _returns_inserted_slices(task_func)
    all_linalg = [op for op in ops_of(task_func.regions[0].blocks[0]) if op.name.startswith("linalg.")]
    structures = generalized_ops(canonical)
    if any(structure is None for structure in structures):
        return None  # an op with no loop nest of its own (linalg.softmax): IREE keeps its configuration
    pairs = [
        (op, generic)
        for op, generic in zip(all_linalg, structures, strict=True)
        if op.name not in STRUCTURAL_SKIP
    ]
    linalg_ops = [op for op, _ in pairs]
    generic_ops = [generic for _, generic in pairs]
    root_index = pick_root(generic_ops)
    root = describe_root(linalg_ops[root_index], generic_ops[root_index])
    flops = sum(_op_flops(g) for g in generic_ops)
    default_config, notes, configured = default_configuration(canonical, target)
    codegen_ops = codegen_linalg_ops(configured) if configured else ()
    if default_config is not None:
        config_loops = len(default_config.levels[0][1])
        if config_loops != len(root.loop_extents):
            notes = notes + (
                f"IREE configures this op with {config_loops} loops, not "
                f"{len(root.loop_extents)} (it inserts a unit batch dimension at codegen "
                "and drops configurations attached before that)",
            )
            default_config = None
    return Task(
        key=key,
        name=exe_name,
        func_text=canonical,
        func_name="task",
        input_types=tuple(input_types),
        output_types=tuple(output_types),
        ops=tuple(op.name for op in linalg_ops),
        root=root,
        root_index=root_index,
        flops=flops,
        weight=1,
        default_config=default_config,
        notes=notes,
        codegen_ops=codegen_ops,
        stores_into_slice=stores_into_slice,
    )


def _returns_inserted_slices(func: ir.Operation) -> bool:
    """Whether the function returns a `tensor.insert_slice` into a fill: a store into part of an output (`_insert`)."""
    returned = ops_of(func.regions[0].blocks[0])[-1]
    owners = [value.owner for value in returned.operands]
    owners = [o.operation if isinstance(o, ir.OpView) else o for o in owners]
    return any(isinstance(o, ir.Operation) and o.name == "tensor.insert_slice"
               and _owner_name(o.operands[1]) == "linalg.fill" for o in owners)


def _owner_name(value: ir.Value) -> str:
    owner = producer(value)
    return owner.name if owner is not None else ""


def generalized_ops(func_text: str) -> list[dict | None]:
    """Loop structure of every linalg op, read off its generic form (None for an op that is not a loop nest,
    such as `linalg.softmax`, which IREE decomposes only at codegen)."""
    result = run_tool("iree-opt", ["--linalg-generalize-named-ops", "-"], stdin=func_text.encode())
    if not result.ok:
        raise AnsorError(f"cannot analyse task: {first_error_line(result.stderr)}")
    ctx = new_context()
    module = ir.Module.parse(result.stdout.decode(), ctx)
    func = module.body.operations[0].operation
    out = []
    for op in ops_of(func.regions[0].blocks[0]):
        if op.name.startswith("linalg."):
            out.append(loop_structure(op) if "indexing_maps" in op.attributes else None)
    return out


def pick_root(ops: list[dict]) -> int:
    """IREE's root: the last op with reductions, else the last op."""
    with_reduction = [i for i, op in enumerate(ops) if "reduction" in op["iterators"]]
    if with_reduction:
        return max(with_reduction, key=lambda i: (len(ops[i]["extents"]), i))
    return len(ops) - 1


def _op_flops(op: dict) -> int:
    arith = sum(1 for name in op["body"] if name.startswith(ARITH_PREFIXES))
    return prod(op["extents"]) * max(arith, 1)


def describe_root(op: ir.Operation, generic: dict) -> RootOp:
    operands: list[ir.Value] = []
    for value in op.operands:
        if value not in operands:
            operands.append(value)
    elem = ir.ShapedType(op.results[0].type).element_type
    return RootOp(
        name=op.name,
        loop_extents=generic["extents"],
        iterator_types=generic["iterators"],
        indexing_maps=generic["maps"],
        operand_types=tuple(str(v.type) for v in operands),
        element_type=str(elem),
        element_bytes=_element_bytes(elem),
        body_ops=generic["body"],
    )


def _element_bytes(elem: ir.Type) -> int:
    """Bytes per element (a bit-sized type takes a byte); 4 for types of no fixed width (index)."""
    if isinstance(elem, (ir.IntegerType, ir.FloatType)):
        return max(1, elem.width // 8)
    return 4


def codegen_linalg_ops(configured: str) -> tuple[LinalgOpInfo, ...]:
    """The linalg ops of the (single) dispatch function of IREE's configured executable."""
    generalized = run_tool("iree-opt", ["--linalg-generalize-named-ops", "-"], stdin=configured.encode())
    if not generalized.ok:
        return ()
    ctx = new_context()
    named_module = ir.Module.parse(configured, ctx)
    generic_module = ir.Module.parse(generalized.stdout.decode(), ctx)
    named = _dispatch_linalg_ops(named_module)
    generic = _dispatch_linalg_ops(generic_module)
    if len(named) != len(generic):
        return ()
    infos = []
    for index, (op, gen) in enumerate(zip(named, generic, strict=True)):
        structure = loop_structure(gen)
        producers = tuple(_producer_index(value, named[:index]) for value in op.operands)
        infos.append(LinalgOpInfo(
            name=op.name,
            extents=structure["extents"],
            iterator_types=structure["iterators"],
            indexing_maps=structure["maps"],
            num_inputs=len(op.operands) - len(op.results),
            producers=producers,
            body_ops=structure["body"],
        ))
    return tuple(infos)


def _producer_index(value: ir.Value, earlier: list[ir.Operation]) -> int:
    for index, op in enumerate(earlier):
        if any(value == result for result in op.results):
            return index
    return -1


def _dispatch_linalg_ops(module: ir.Module) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(block: ir.Block) -> None:
        for op in ops_of(block):
            if op.name.startswith("linalg.") and op.name not in ("linalg.yield", "linalg.index"):
                found.append(op)
                continue
            for region in op.regions:
                for inner in region.blocks:
                    visit(inner)

    visit(module.body)
    return found


def default_configuration(func_text: str, target: Target) -> tuple[IreeConfig | None, tuple[str, ...], str]:
    """IREE's own configuration of the task (sketch zero) and the configured IR it came from.

    The pipeline is the first CPU pipeline a function's `translation_info`
    names; the tile sizes are those of the last op whose lowering config
    has a `distribution` level (the root; its fused producers and consumers
    carry vector levels only).
    """
    result = run_tool(
        "iree-compile",
        [*target.compile_flags(), "--compile-to=executable-configurations", "-"],
        stdin=as_one_dispatch(func_text, "task").encode(),
    )
    if not result.ok:
        return None, (f"IREE cannot configure it: {first_error_line(result.stderr)}",), ""
    configured = result.stdout.decode()
    module = parse_module(configured, "IREE's configured task", new_context())
    pipeline = None
    levels = None
    for op in walk(module.operation):
        if pipeline is None and "translation_info" in op.attributes:
            pipeline = cpu_pipeline(op.attributes["translation_info"])
        if "lowering_config" in op.attributes:
            read = cpu_lowering_levels(op.attributes["lowering_config"])
            if read is not None and "distribution" in dict(read):
                levels = read
    if target.gpu is not None:  # sketch zero attaches nothing: IREE configures its GPU pipelines itself
        return None, (), configured
    if pipeline is None or levels is None:
        return None, ("IREE gives it no tileable CPU configuration",), configured
    return IreeConfig(pipeline=pipeline, levels=levels), (), configured

"""Partition a linalg module into tasks the way IREE does: one per dispatch.

We ask IREE itself (`--compile-to=flow`) which dispatches it forms, rebuild
each dispatch body as a standalone function on tensors (loads become
arguments, stores become results), de-duplicate them by a structural key and
weight each by how often the model dispatches it. IREE's own configuration of
each task (`--compile-to=executable-configurations`) becomes sketch zero.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from math import prod

from iree.compiler import ir

from ansor_mlir.core.target import Target
from ansor_mlir.core.task import IreeConfig, LinalgOpInfo, RootOp, Task
from ansor_mlir.errors import AnsorError
from ansor_mlir.mlir.context import element_bytes, new_context, op_text, ops_of, parse_module, tensor_shape
from ansor_mlir.mlir.iree_compiler import compile_to_phase, first_error_line, run_tool

LOAD = "iree_tensor_ext.dispatch.tensor.load"
STORE = "iree_tensor_ext.dispatch.tensor.store"
STRUCTURAL_SKIP = {"linalg.fill", "linalg.yield", "linalg.index"}
ARITH_PREFIXES = ("arith.", "math.")


def validate_input(text: str, what: str) -> None:
    """Reject input we cannot tune before IREE sees it."""
    module = parse_module(text, what)
    funcs = [op for op in ops_of(module.body) if op.name in ("func.func", "util.func")]
    if not funcs:
        raise AnsorError(f"{what}: no func.func to tune")
    for func in funcs:
        ftype = str(func.attributes["function_type"])
        if "?" in ftype:
            name = str(func.attributes["sym_name"])
            raise AnsorError(
                f"{what}: function {name} has dynamic shapes ({ftype}): "
                "only static shapes can be tuned"
            )


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
    counts = Counter(re.findall(r"flow\.dispatch @([\w$.-]+)::", flow_text))
    by_key: dict[str, Task] = {}
    for exe in ops_of(module.body):
        if exe.name != "flow.executable":
            continue
        exe_name = str(exe.attributes["sym_name"]).strip('"')
        dispatch = dispatch_function(exe)
        task = task_from_dispatch(dispatch, exe_name, target, ctx)
        if task is None:
            continue
        weight = counts.get(exe_name, 1)
        if task.key in by_key:
            prev = by_key[task.key]
            by_key[task.key] = prev.with_weight(prev.weight + weight)
        else:
            by_key[task.key] = task.with_weight(weight)
    return list(by_key.values())


def dispatch_function(exe: ir.Operation) -> ir.Operation:
    inner = [op for op in ops_of(exe.regions[0].blocks[0]) if op.name == "builtin.module"][0]
    return [op for op in ops_of(inner.regions[0].blocks[0]) if op.name == "func.func"][0]


def canonical_dispatch(
    func: ir.Operation, ctx: ir.Context
) -> tuple[str, str, list[str], list[str]] | None:
    """(key, canonical task text, input types, output types) of a dispatch function."""
    rebuilt = standalone_function(func)
    if rebuilt is None:
        return None
    text, input_types, output_types = rebuilt
    canonical = canonical_function(text, ctx)
    return workload_key(canonical), canonical, input_types, output_types


def dispatch_executable_key(exe: ir.Operation, ctx: ir.Context) -> str | None:
    """The workload key of a flow.executable (used when applying records)."""
    dispatch = canonical_dispatch(dispatch_function(exe), ctx)
    return dispatch[0] if dispatch else None


def compute_ops(func: ir.Operation) -> list[ir.Operation]:
    """The linalg ops of a function that do work (fills excluded), in order."""
    return [
        op
        for op in ops_of(func.regions[0].blocks[0])
        if op.name.startswith("linalg.") and op.name not in STRUCTURAL_SKIP
    ]


def standalone_function(func: ir.Operation) -> tuple[str, list[str], list[str]] | None:
    """Rebuild a dispatch body as `func.func @task(inputs) -> outputs` text."""
    state = ir.AsmState(func)
    body = ops_of(func.regions[0].blocks[0])
    args: list[str] = []
    arg_types: list[str] = []
    lines: list[str] = []
    results: list[str] = []
    result_types: list[str] = []
    has_compute = False
    for op in body:
        if op.name == LOAD:
            value = op.results[0]
            name = value.get_name(state)
            source_type = _dispatch_tensor_type(str(op.operands[0].type))
            vtype = str(value.type)
            if source_type == vtype and _is_full(op):
                args.append(f"{name}: {vtype}")
                arg_types.append(vtype)
            else:
                arg = f"%ansor_arg{len(args)}"
                args.append(f"{arg}: {source_type}")
                arg_types.append(source_type)
                lines.append(_extract_slice(name, arg, op, source_type, vtype))
        elif op.name == STORE:
            target_type = _dispatch_tensor_type(str(op.operands[1].type))
            if target_type != str(op.operands[0].type) or not _is_full(op):
                return None  # a partial store (e.g. a pad copy): not a compute task
            results.append(op.operands[0].get_name(state))
            result_types.append(target_type)
        elif op.name == "func.return":
            continue
        else:
            if op.name.startswith("linalg.") and op.name not in STRUCTURAL_SKIP:
                has_compute = True
            lines.append(op_text(op, state))
    if not has_compute or not results:
        return None
    signature = ", ".join(args)
    rtypes = ", ".join(result_types)
    text = (
        f"func.func @task({signature}) -> ({rtypes}) {{\n"
        + "".join(f"  {line}\n" for line in lines)
        + f"  return {', '.join(results)} : {rtypes}\n}}\n"
    )
    return text, arg_types, result_types


def _dispatch_tensor_type(text: str) -> str:
    match = re.search(r"<(?:readonly|writeonly|readwrite):(tensor<[^>]*>)>", text)
    if not match:
        raise AnsorError(f"unexpected dispatch binding type {text}")
    return match.group(1)


def _array_ints(op: ir.Operation, attr: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[attr]))


def _is_full(op: ir.Operation) -> bool:
    offsets = _array_ints(op, "static_offsets")
    strides = _array_ints(op, "static_strides")
    return all(o == 0 for o in offsets) and all(s == 1 for s in strides)


def _extract_slice(name: str, arg: str, op: ir.Operation, source: str, result: str) -> str:
    def ints(attr: str) -> str:
        return ", ".join(map(str, _array_ints(op, attr)))

    return (
        f"{name} = tensor.extract_slice {arg}[{ints('static_offsets')}] "
        f"[{ints('static_sizes')}] [{ints('static_strides')}] : {source} to {result}"
    )


def canonical_function(text: str, ctx: ir.Context) -> str:
    """Re-print through the parser so equal structure gives equal text."""
    module = ir.Module.parse(text, ctx)
    return str(module.body.operations[0])


def task_from_dispatch(
    func: ir.Operation, exe_name: str, target: Target, ctx: ir.Context
) -> Task | None:
    dispatch = canonical_dispatch(func, ctx)
    if dispatch is None:
        return None
    key, canonical, input_types, output_types = dispatch
    module = ir.Module.parse(canonical, ctx)
    task_func = module.body.operations[0].operation
    all_linalg = [op for op in ops_of(task_func.regions[0].blocks[0]) if op.name.startswith("linalg.")]
    pairs = [
        (op, generic)
        for op, generic in zip(all_linalg, generalized_ops(canonical), strict=True)
        if op.name not in STRUCTURAL_SKIP
    ]
    linalg_ops = [op for op, _ in pairs]
    generic_ops = [generic for _, generic in pairs]
    root_index = pick_root(generic_ops)
    root = describe_root(linalg_ops[root_index], generic_ops[root_index], task_func)
    flops = sum(_op_flops(g) for g in generic_ops)
    default_config, notes, configured = default_configuration(canonical, target, len(root.loop_extents))
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
    )


def generalized_ops(func_text: str) -> list[dict]:
    """Loop structure of every linalg op, read off its generic form."""
    result = run_tool("iree-opt", ["--linalg-generalize-named-ops", "-"], stdin=func_text.encode())
    if not result.ok:
        raise AnsorError(f"cannot analyse task: {first_error_line(result.stderr)}")
    ctx = new_context()
    module = ir.Module.parse(result.stdout.decode(), ctx)
    func = module.body.operations[0].operation
    out = []
    for op in ops_of(func.regions[0].blocks[0]):
        if op.name.startswith("linalg."):
            out.append(_loop_structure(op))
    return out


def _loop_structure(op: ir.Operation) -> dict:
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    iterators = [str(a).split("<")[-1].rstrip(">") for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    iterators = [re.sub(r"[^a-z]", "", it) for it in iterators]
    extents = [0] * len(iterators)
    for amap, operand in zip(maps, op.operands, strict=True):
        if not isinstance(operand.type, ir.RankedTensorType) and "tensor<" not in str(operand.type):
            continue
        shape = ir.RankedTensorType(operand.type).shape
        for pos, expr in enumerate(amap.results):
            if isinstance(expr, ir.AffineDimExpr):
                extents[expr.position] = max(extents[expr.position], shape[pos])
    body = [o.name for o in ops_of(op.regions[0].blocks[0]) if o.name != "linalg.yield"]
    return {
        "extents": tuple(extents),
        "iterators": tuple(iterators),
        "maps": tuple(str(m) for m in maps),
        "body": tuple(body),
    }


def pick_root(ops: list[dict]) -> int:
    """IREE's root: the last op with reductions, else the last op."""
    with_reduction = [i for i, op in enumerate(ops) if "reduction" in op["iterators"]]
    if with_reduction:
        return max(with_reduction, key=lambda i: (len(ops[i]["extents"]), i))
    return len(ops) - 1


def _op_flops(op: dict) -> int:
    arith = sum(1 for name in op["body"] if name.startswith(ARITH_PREFIXES))
    return prod(op["extents"]) * max(arith, 1)


def describe_root(op: ir.Operation, generic: dict, func: ir.Operation) -> RootOp:
    state = ir.AsmState(func)
    operand_names: list[str] = []
    operand_types: list[str] = []
    for value in op.operands:
        name = value.get_name(state)
        if name not in operand_names:
            operand_names.append(name)
            operand_types.append(str(value.type))
    text = op_text(op, state)
    for i, name in enumerate(operand_names):
        text = re.sub(re.escape(name) + r"(?![\w$.])", f"%ansor_in{i}", text)
    text = re.sub(r"^\s*%[\w$.#]+(:\d+)? = ", "%ansor_root = ", text, count=1)
    out_type = str(op.results[0].type)
    _, elem = tensor_shape(out_type)
    block_args = ", ".join(f"%ansor_in{i}: {t}" for i, t in enumerate(operand_types))
    matcher = f"^bb0({block_args}):\n  {text}"
    return RootOp(
        name=op.name,
        loop_extents=generic["extents"],
        iterator_types=generic["iterators"],
        indexing_maps=generic["maps"],
        operand_types=tuple(operand_types),
        element_type=elem,
        element_bytes=element_bytes(elem),
        body_ops=generic["body"],
        matcher_text=matcher,
    )


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
        structure = _loop_structure(gen)
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


def default_configuration(
    func_text: str, target: Target, loops: int
) -> tuple[IreeConfig | None, tuple[str, ...], str]:
    """IREE's own configuration of the task (sketch zero) and the configured IR it came from."""
    module = f"module {{\n{func_text}}}\n"
    result = run_tool(
        "iree-compile",
        [*target.compile_flags(), "--compile-to=executable-configurations", "-"],
        stdin=module.encode(),
    )
    if not result.ok:
        return None, (f"IREE cannot configure it: {first_error_line(result.stderr)}",), ""
    configured = result.stdout.decode()
    pipeline = re.search(r"#iree_cpu\.pipeline<(\w+)>", configured)
    best: tuple[int, str] | None = None
    for match in re.finditer(r"lowering_config = #iree_cpu\.lowering_config<([^>]*)>", configured):
        body = match.group(1)
        if "distribution" in body:
            best = (len(body), body)
    if pipeline is None or best is None:
        return None, ("IREE gives it no tileable CPU configuration",), configured
    levels = tuple(
        (name, tuple(int(x) for x in re.findall(r"-?\d+", sizes)))
        for name, sizes in re.findall(r"(\w+) = \[([^\]]*)\]", best[1])
    )
    return IreeConfig(pipeline=pipeline.group(1), levels=levels), (), configured

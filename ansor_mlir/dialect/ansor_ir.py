"""Tasks and sketches as `ansor` dialect IR, built with the MLIR bindings, and read back.

The dialect is defined in IRDL (`ansor.irdl.mlir` next to this file), so
`iree-opt --irdl-file=<that file>` verifies what we build; the bindings know
no `ansor` ops, so they are created generically (`ir.Operation.create` with
typed attributes) in a context that allows unregistered dialects. Printing is
MLIR's own (attributes sorted, values numbered), so printed IR parses back
and prints the same text.

Layout of one task (see `ansor.irdl.mlir` for why regions end in
`transform.yield` and the function sits in a `builtin.module`):

    "ansor.task"() ({
      module { func.func @task(...) {...} }
      "ansor.sketch"() ({
      ^bb0(%root: !transform.any_op):
        transform.match.operation_name %root [...]          // the tuning-spec matcher of the task's root
        %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {...}  // (`match_root`)
        %d0 = "ansor.knob"() {...} : () -> !transform.any_param
        ...
        %config = "ansor.compilation_info"(%d0, ...) {...} : (...) -> !transform.any_param
        transform.yield %root, %config : !transform.any_op, !transform.any_param
      }) {index = 1 : i64, ...} : () -> ()
      transform.yield
    }) {key = "...", ...} : () -> ()

An `ansor.sketch` region is the body of the matcher sequence named by its
`sequence` attribute; filling its holes (knobs) gives the tuning-spec matcher.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from iree.compiler import ir
from iree.compiler.dialects import builtin, transform

from ansor_mlir.codegen.iree_config import compilation_info
from ansor_mlir.codegen.tuning_spec import match_root
from ansor_mlir.core.schedule import ChoiceKnob, Family, Knob, Sketch
from ansor_mlir.core.task import Task
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.task_extraction import compute_ops
from ansor_mlir.mlir.context import ops_of, parse_module
from ansor_mlir.space.dag import task_dag
from ansor_mlir.space.gpu_mapping import describe as describe_gpu_mapping
from ansor_mlir.space.gpu_mapping import is_gpu_sketch

IRDL_PATH = Path(__file__).with_name("ansor.irdl.mlir")
TASK = "ansor.task"
SKETCH = "ansor.sketch"
NO_PIPELINE = "none"


# ---- typed attributes ----------------------------------------------------------------------------------------


def i64(value: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(value))


def strings(values: Sequence[str]) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([ir.StringAttr.get(str(v)) for v in values])


def i64_array(values: Sequence[int]) -> ir.DenseI64ArrayAttr:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


# ---- building ------------------------------------------------------------------------------------------------


def tasks_module(entries: Sequence[tuple[Task, Sequence[Sketch]]], context: ir.Context) -> ir.Module:
    """A module of `ansor.task` ops: each task's function, then its sketches (none for bare tasks).

    `context` must allow unregistered dialects (the `ansor` ops are not registered).
    """
    with context, ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            for task, sketches in entries:
                task_op(task, sketches)
    return module


def task_pipeline(task: Task) -> str:
    """IREE's default pipeline for the task, or "none" when IREE gave no configuration."""
    return task.default_config.pipeline if task.default_config is not None else NO_PIPELINE


def task_attributes(task: Task) -> dict[str, ir.Attribute]:
    return {
        "key": ir.StringAttr.get(task.key),
        "name": ir.StringAttr.get(task.name),
        "weight": i64(task.weight),
        "flops": i64(task.flops),
        "root": ir.StringAttr.get(task.root.name),
        "root_index": i64(task.root_index),
        "loop_extents": i64_array(task.root.loop_extents),
        "iterator_types": strings(task.root.iterator_types),
        "pipeline": ir.StringAttr.get(task_pipeline(task)),
    }


def task_op(task: Task, sketches: Sequence[Sketch] = ()) -> ir.Operation:
    """An `ansor.task` at the current insertion point: the task's function in a module, then its sketches."""
    source = ir.Module.parse(task.func_text)
    func = ops_of(source.body)[0]
    op = ir.Operation.create(TASK, attributes=task_attributes(task), regions=1)
    with ir.InsertionPoint(op.regions[0].blocks.append()):
        holder = builtin.ModuleOp()
        func.clone(ip=ir.InsertionPoint(holder.body))
        root = compute_ops(func)[task.root_index]
        for sketch in sketches:
            sketch_op(task, sketch, root)
        transform.YieldOp([])
    return op


def sequence_name(task: Task, sketch: Sketch) -> str:
    """Name (without `@`) of the matcher sequence a sketch becomes once its holes are filled."""
    return f"ansor_sketch_{task.key}_s{sketch.index}"


def strategy_sequence_name(task: Task, sketch: Sketch) -> str:
    return f"ansor_strategy_{task.key}_s{sketch.index}"


def sketch_op(task: Task, sketch: Sketch, root: ir.Operation) -> ir.Operation:
    """An `ansor.sketch` at the current insertion point: the matcher of `root`, the sketch's holes, its config
    (and, for a GPU sketch, its `ansor.gpu_mapping`).

    The one place that reads a `Sketch`: its index, family, pipeline, levels,
    rules, knobs and (for sketch zero) fixed configuration. A sketch with
    knobs defines one `ansor.knob`/`ansor.choice` per knob and feeds them all
    to `ansor.compilation_info` (pipeline family) or `ansor.strategy`
    (transform family); a sketch without knobs yields its fixed configuration
    (or `unit`: IREE's own choice, nothing attached) as a constant.
    """
    if sketch.task_key != task.key:
        raise ValueError(f"sketch {sketch.index} belongs to task {sketch.task_key}, not {task.key}")
    family = Family(sketch.family)
    attributes = {
        "task": ir.StringAttr.get(task.key),
        "index": i64(sketch.index),
        "sequence": ir.StringAttr.get(sequence_name(task, sketch)),
        "pipeline": ir.StringAttr.get(sketch.pipeline),
        "rules": strings(sketch.rules),
        "family": ir.StringAttr.get(family.value),
    }
    op = ir.Operation.create(SKETCH, attributes=attributes, regions=1)
    any_op = transform.AnyOpType.get()
    param = transform.AnyParamType.get()
    block = op.regions[0].blocks.append(any_op)
    with ir.InsertionPoint(block):
        handle = block.arguments[0]
        match_root(handle, root)
        if is_gpu_sketch(sketch):
            gpu_mapping_op(sketch, task)
        if sketch.knobs:
            knobs = [knob_op(knob).result for knob in sketch.knobs]
            if family == Family.TRANSFORM:
                name, config = "ansor.strategy", {"strategy": ir.StringAttr.get(strategy_sequence_name(task, sketch)),
                                                  "root": ir.StringAttr.get(codegen_root_name(task))}
            else:
                name, config = "ansor.compilation_info", {"pipeline": ir.StringAttr.get(sketch.pipeline)}
            config["levels"] = strings(sketch.levels)
            result = ir.Operation.create(name, results=[param], operands=knobs, attributes=config).result
        else:
            fixed = sketch.fixed_config
            value = compilation_info(fixed) if fixed is not None else ir.UnitAttr.get()
            result = transform.ParamConstantOp(param, value).result
        transform.YieldOp([handle, result])
    return op


def gpu_mapping_op(sketch: Sketch, task: Task) -> ir.Operation:
    """An `ansor.gpu_mapping`: how a GPU sketch maps the root to blocks, threads, shared memory and registers."""
    attributes = {name: ir.StringAttr.get(text) for name, text in describe_gpu_mapping(sketch, task).items()}
    return ir.Operation.create("ansor.gpu_mapping", attributes=attributes)


def knob_op(knob: Knob) -> ir.Operation:
    """One `ansor.knob` (tile sizes of a loop across levels) or `ansor.choice` (categorical)."""
    param = transform.AnyParamType.get()
    if isinstance(knob, ChoiceKnob):
        attributes = {"name": ir.StringAttr.get(knob.name), "options": strings(knob.options)}
        return ir.Operation.create("ansor.choice", results=[param], attributes=attributes)
    attributes = {
        "name": ir.StringAttr.get(knob.name),
        "dim": i64(knob.dim),
        "extent": i64(knob.extent),
        "kind": ir.StringAttr.get(knob.kind),
        "levels": strings(knob.levels),
        "padded": ir.BoolAttr.get(knob.padded),
    }
    if knob.op is not None:
        attributes["op"] = i64(knob.op)
    return ir.Operation.create("ansor.knob", results=[param], attributes=attributes)


def codegen_root_name(task: Task) -> str:
    dag = task_dag(task)
    return dag.ops[dag.root].name if dag else task.root.name


# ---- reading -------------------------------------------------------------------------------------------------


def walk(block: ir.Block, stop: str | None = None) -> Iterator[ir.Operation]:
    """Ops under `block` in textual order, not descending into ops named `stop`."""
    for op in ops_of(block):
        yield op
        if op.name == stop:
            continue
        for region in op.regions:
            for inner in region.blocks:
                yield from walk(inner, stop)


def task_ops(module: ir.Module) -> list[ir.Operation]:
    """The module's `ansor.task` ops, in textual order."""
    return [op for op in walk(module.body, stop=TASK) if op.name == TASK]


def task_function(op: ir.Operation) -> ir.Operation | None:
    """The `func.func` of an `ansor.task` (in the module at the start of its region)."""
    return next((inner for inner in walk(op.regions[0].blocks[0], stop=SKETCH) if inner.name == "func.func"), None)


def attr_value(attr: ir.Attribute) -> object:
    """A plain Python value for a string, bool, integer, dense integer array or (nested) array attribute."""
    if isinstance(attr, ir.StringAttr):
        return attr.value
    if isinstance(attr, ir.BoolAttr):
        return attr.value
    if isinstance(attr, ir.IntegerAttr):
        return attr.value
    if isinstance(attr, ir.DenseI64ArrayAttr):
        return list(attr)
    if isinstance(attr, ir.ArrayAttr):
        return [attr_value(item) for item in attr]
    raise AnsorError(f"unexpected attribute {attr} in ansor IR")


def attributes(op: ir.Operation) -> dict[str, object]:
    named = op.attributes
    return {named[i].name: attr_value(named[i].attr) for i in range(len(named))}


def functions_module(module: ir.Module) -> ir.Module:
    """The module with each `ansor.task` replaced by its function, named after the task.

    This is what passes compile when given ansor IR: IREE forms the same
    dispatches from the task functions as from the module they came from. A
    task given twice (same key) is compiled once; a name taken already gets a
    numeric suffix, so the module stays a valid symbol table.
    """
    keys: set[str] = set()
    names: set[str] = set()
    with module.context, ir.Location.unknown():
        out = ir.Module.create()
        point = ir.InsertionPoint(out.body)
        for op in ops_of(module.body):
            if op.name != TASK:
                op.clone(ip=point)
                continue
            attrs, func = attributes(op), task_function(op)
            if func is None or attrs["key"] in keys:
                continue
            keys.add(str(attrs["key"]))
            name = unique_name(str(attrs["name"]), names)
            names.add(name)
            func.clone(ip=point).attributes["sym_name"] = ir.StringAttr.get(name)
    return out


def unique_name(name: str, taken: set[str]) -> str:
    """`name`, or `name_1`, `name_2`, ... for the first not in `taken`."""
    candidates = (name if n == 0 else f"{name}_{n}" for n in range(len(taken) + 1))
    return next(c for c in candidates if c not in taken)


def read_task_ops(source: str | ir.Module, what: str = "<ansor IR>") -> list[dict]:
    """Every `ansor.task` as plain Python values, in textual order.

    Each dict holds the task's attributes (key, name, weight, flops, root,
    root_index, loop_extents, iterator_types, pipeline), `func` (the task
    function's text or None) and `sketches`: one dict per `ansor.sketch` with
    its attributes (task, index, sequence, pipeline, rules, family), `knobs`
    (each knob's or choice's attributes), `levels` (of its config op, None
    for a constant configuration) and `fixed_config` (the constant's text for
    a sketch without knobs, else None).
    """
    if isinstance(source, str):
        context = ir.Context()
        context.allow_unregistered_dialects = True
        source = parse_module(source, what, context)
    out = []
    for op in task_ops(source):
        task = attributes(op)
        func = task_function(op)
        task["func"] = str(func) if func is not None else None
        task["sketches"] = [read_sketch(inner) for inner in walk(op.regions[0].blocks[0], stop=SKETCH)
                            if inner.name == SKETCH]
        out.append(task)
    return out


def read_sketch(op: ir.Operation) -> dict:
    sketch = attributes(op)
    sketch.update(knobs=[], levels=None, fixed_config=None)
    for inner in ops_of(op.regions[0].blocks[0]):
        if inner.name in ("ansor.knob", "ansor.choice"):
            sketch["knobs"].append(attributes(inner))
        elif inner.name in ("ansor.compilation_info", "ansor.strategy"):
            sketch["levels"] = attr_value(inner.attributes["levels"])
        elif inner.name == "transform.param.constant":
            sketch["fixed_config"] = str(inner.attributes["value"])
    return sketch

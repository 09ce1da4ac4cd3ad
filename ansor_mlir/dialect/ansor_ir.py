"""Print tasks and sketches as `ansor` dialect IR, and read them back.

The dialect is defined in IRDL (`ansor.irdl.mlir` next to this file), so
`iree-opt --irdl-file=<that file>` parses and verifies what we print. Every op
is printed in generic form with its attributes in sorted order; printing is
pure and deterministic (same input, byte-identical text).

Layout of one task (see `ansor.irdl.mlir` for why regions end in
`transform.yield` and the function sits in a `builtin.module`):

    "ansor.task"() ({
      module { func.func @task(...) {...} }
      "ansor.sketch"() ({
      ^bb0(%root: !transform.any_op):
        <matcher: operation name check + structural DAG match>
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

import re
from pathlib import Path

from iree.compiler import ir

from ansor_mlir.codegen.tuning_spec import matcher_prefix
from ansor_mlir.core.schedule import TRANSFORM_FAMILY, ChoiceKnob, Knob, Sketch
from ansor_mlir.core.task import Task
from ansor_mlir.errors import AnsorError
from ansor_mlir.mlir.context import indent, new_context, ops_of, parse_module
from ansor_mlir.space.dag import task_dag

IRDL_PATH = Path(__file__).with_name("ansor.irdl.mlir")

PARAM = "!transform.any_param"
ANY_OP = "!transform.any_op"
NO_PIPELINE = "none"
# SSA names the sketch body defines itself; knobs may not reuse them.
RESERVED_NAMES = frozenset({"root", "ins", "outs", "config"})
_KNOB_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")


def string_attr(value: str) -> str:
    """An MLIR string literal: quotes and backslashes escaped, other non-printables as hex."""
    out = []
    for byte in value.encode("utf-8"):
        char = chr(byte)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= byte < 0x7F:
            out.append(char)
        else:
            out.append(f"\\{byte:02X}")
    return '"' + "".join(out) + '"'


def int_attr(value: int) -> str:
    return f"{int(value)} : i64"


def int_array_attr(values: tuple[int, ...] | list[int]) -> str:
    """An array of i64 integers (the element type MLIR gives untyped integers)."""
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def string_array_attr(values: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(string_attr(v) for v in values) + "]"


def attr_dict(attrs: dict[str, str]) -> str:
    """An attribute dictionary with keys in sorted order (as MLIR prints it)."""
    return "{" + ", ".join(f"{name} = {attrs[name]}" for name in sorted(attrs)) + "}"


def _dedent(line: str, spaces: int) -> str:
    strip = min(spaces, len(line) - len(line.lstrip(" ")))
    return line[strip:]


def task_pipeline(task: Task) -> str:
    """IREE's default pipeline for the task, or "none" when IREE gave no configuration."""
    return task.default_config.pipeline if task.default_config is not None else NO_PIPELINE


def task_attrs(task: Task) -> dict[str, str]:
    return {
        "key": string_attr(task.key),
        "name": string_attr(task.name),
        "weight": int_attr(task.weight),
        "flops": int_attr(task.flops),
        "root": string_attr(task.root.name),
        "root_index": int_attr(task.root_index),
        "loop_extents": int_array_attr(task.root.loop_extents),
        "iterator_types": string_array_attr(task.root.iterator_types),
        "pipeline": string_attr(task_pipeline(task)),
    }


def symbol_table(body: str) -> str:
    """`body` (ops text) inside a `builtin.module`, the symbol table a `func.func` needs as parent."""
    return "module {\n" + indent(body.strip("\n"), 2) + "\n}"


def func_module(task: Task) -> str:
    """The task's function inside a `builtin.module`."""
    return symbol_table(task.func_text)


def task_op(task: Task, body: str) -> str:
    """The `ansor.task` op whose one-block region holds `body` (ops text), then `transform.yield`.

    `body` is typically the task's function and/or `sketch_op(...)` texts, joined
    by newlines. A body starting with a bare `func.func` is first wrapped in a
    `builtin.module` (`symbol_table`), since a function cannot be the direct
    child of an op that is not a symbol table.
    """
    inner = body.strip("\n")
    if inner.lstrip().startswith("func.func"):
        inner = symbol_table(inner)
    lines = ['"ansor.task"() ({']
    if inner:
        lines.append(indent(inner, 2))
    lines.append("  transform.yield")
    lines.append("}) " + attr_dict(task_attrs(task)) + " : () -> ()")
    return "\n".join(lines)


def sequence_name(task: Task, sketch: Sketch) -> str:
    """Name (without `@`) of the matcher sequence a sketch becomes once its holes are filled."""
    return f"ansor_sketch_{task.key}_s{sketch.index}"


def _matcher_body(task: Task) -> list[str]:
    """The matcher's checks on `%root`: `matcher_prefix` without its sequence header."""
    lines = matcher_prefix(task).rstrip("\n").splitlines()
    return [_dedent(line, 4) for line in lines[1:]]


def _check_knob_names(sketch: Sketch) -> None:
    seen: set[str] = set()
    for knob in sketch.knobs:
        if not _KNOB_NAME.fullmatch(knob.name) or knob.name in RESERVED_NAMES or knob.name in seen:
            raise ValueError(f"sketch {sketch.index}: knob name {knob.name!r} is not a usable SSA name")
        seen.add(knob.name)


def knob_line(knob: Knob) -> str:
    """One `ansor.knob` (tile sizes) or `ansor.choice` (categorical) op defining `%<knob.name>`."""
    if isinstance(knob, ChoiceKnob):
        attrs = {"name": string_attr(knob.name), "options": string_array_attr(knob.options)}
        return f'%{knob.name} = "ansor.choice"() {attr_dict(attrs)} : () -> {PARAM}'
    attrs = {
        "name": string_attr(knob.name),
        "dim": int_attr(knob.dim),
        "extent": int_attr(knob.extent),
        "kind": string_attr(knob.kind),
        "levels": string_array_attr(knob.levels),
    }
    return f'%{knob.name} = "ansor.knob"() {attr_dict(attrs)} : () -> {PARAM}'


def _config_lines(task: Task, sketch: Sketch) -> list[str]:
    if not sketch.knobs:
        if sketch.fixed_config is None:
            # IREE's own choice with nothing attached: the untuned reference.
            return [f"%config = transform.param.constant unit -> {PARAM}"]
        return [f"%config = transform.param.constant {sketch.fixed_config.compilation_info()} -> {PARAM}"]
    _check_knob_names(sketch)
    operands = ", ".join(f"%{knob.name}" for knob in sketch.knobs)
    types = ", ".join(PARAM for _ in sketch.knobs)
    if sketch.family == TRANSFORM_FAMILY:
        attrs = {
            "strategy": string_attr(f"ansor_strategy_{task.key}_s{sketch.index}"),
            "root": string_attr(_codegen_root_name(task)),
            "levels": string_array_attr(sketch.levels),
        }
        op = "ansor.strategy"
    else:
        attrs = {"pipeline": string_attr(sketch.pipeline), "levels": string_array_attr(sketch.levels)}
        op = "ansor.compilation_info"
    return [knob_line(knob) for knob in sketch.knobs] + [
        f'%config = "{op}"({operands}) {attr_dict(attrs)} : ({types}) -> {PARAM}'
    ]


def _codegen_root_name(task: Task) -> str:
    dag = task_dag(task)
    return dag.ops[dag.root].name if dag else task.root.name


def sketch_attrs(task: Task, sketch: Sketch) -> dict[str, str]:
    return {
        "task": string_attr(task.key),
        "index": int_attr(sketch.index),
        "sequence": string_attr(sequence_name(task, sketch)),
        "pipeline": string_attr(sketch.pipeline),
        "rules": string_array_attr(sketch.rules),
        "family": string_attr(sketch.family),
    }


def sketch_op(task: Task, sketch: Sketch) -> str:
    """The `ansor.sketch` op: the matcher body over `%root` with the sketch's holes as knobs.

    A sketch with knobs defines one `ansor.knob` per knob and feeds them all to
    `ansor.compilation_info`; sketch zero (no knobs) uses its fixed configuration
    as a `transform.param.constant`. Both yield `%root, %config`.
    """
    if sketch.task_key != task.key:
        raise ValueError(f"sketch {sketch.index} belongs to task {sketch.task_key}, not {task.key}")
    body = _matcher_body(task) + _config_lines(task, sketch)
    body.append(f"transform.yield %root, %config : {ANY_OP}, {PARAM}")
    lines = ['"ansor.sketch"() ({', f"^bb0(%root: {ANY_OP}):"]
    lines.extend("  " + line if line.strip() else "" for line in body)
    lines.append("}) " + attr_dict(sketch_attrs(task, sketch)) + " : () -> ()")
    return "\n".join(lines)


def module_text(ops: list[str]) -> str:
    """A top-level `module { ... }` holding `ops` (one text per op, in order)."""
    inner = "\n".join(indent(op.strip("\n"), 2) for op in ops)
    return "module {\n" + (inner + "\n" if inner else "") + "}\n"


# ---- reading back ---------------------------------------------------------


def attr_value(attr: ir.Attribute) -> object:
    """A plain Python value for a string, integer, or (nested) array attribute."""
    if isinstance(attr, ir.StringAttr):
        return attr.value
    if isinstance(attr, ir.IntegerAttr):
        return attr.value
    if isinstance(attr, ir.ArrayAttr):
        return [attr_value(item) for item in attr]
    raise AnsorError(f"unexpected attribute {attr} in ansor IR")


def _attrs(op: ir.Operation) -> dict[str, object]:
    named = op.attributes
    return {named[i].name: attr_value(named[i].attr) for i in range(len(named))}


def _body_ops(op: ir.Operation) -> list[ir.Operation]:
    return ops_of(op.regions[0].blocks[0]) if op.regions and len(op.regions[0].blocks) else []


def _read_sketch(op: ir.Operation) -> dict:
    sketch = _attrs(op)
    knobs: list[dict] = []
    sketch["levels"] = None
    sketch["fixed_config"] = None
    for inner in _body_ops(op):
        if inner.name == "ansor.knob":
            knobs.append(_attrs(inner))
        elif inner.name == "ansor.choice":
            knobs.append(_attrs(inner))
        elif inner.name in ("ansor.compilation_info", "ansor.strategy"):
            sketch["levels"] = attr_value(inner.attributes["levels"])
        elif inner.name == "transform.param.constant":
            sketch["fixed_config"] = str(inner.attributes["value"])
    sketch["knobs"] = knobs
    return sketch


def _walk(block: ir.Block, stop: str | None = None):
    """Ops under `block` in textual order, not descending into ops named `stop`."""
    for op in ops_of(block):
        yield op
        if op.name == stop:
            continue
        for region in op.regions:
            for inner in region.blocks:
                yield from _walk(inner, stop)


def _read_task(op: ir.Operation) -> dict:
    task = _attrs(op)
    task["func"] = None
    sketches = []
    for block in op.regions[0].blocks:
        for inner in _walk(block, stop="ansor.sketch"):
            if inner.name == "func.func" and task["func"] is None:
                task["func"] = str(inner)
            elif inner.name == "ansor.sketch":
                sketches.append(_read_sketch(inner))
    task["sketches"] = sketches
    return task


def read_task_ops(text: str, what: str = "<ansor IR>") -> list[dict]:
    """Every `ansor.task` in `text`, as plain Python values, in textual order.

    Each dict holds the task's attributes (key, name, weight, flops, root,
    root_index, loop_extents, iterator_types, pipeline), `func` (the task
    function's text or None) and `sketches`: one dict per `ansor.sketch` with
    its attributes (task, index, sequence, pipeline, rules), `knobs` (each
    knob's name, dim, extent, kind, levels), `levels` (of its
    `ansor.compilation_info`, None for sketch zero) and `fixed_config` (the
    constant configuration's text for sketch zero, else None).
    """
    ctx = new_context(allow_unregistered=True)
    module = parse_module(text, what, ctx)
    return [_read_task(op) for op in _walk(module.body, stop="ansor.task") if op.name == "ansor.task"]

"""The `ansor-*` passes: each maps a module object to a module object in the same context.

A pass accepts any pass's output: a linalg module (the user's input or
IREE's flow-level module that `ansor-tune`/`ansor-apply-best` print) or
`ansor` dialect IR, whose tasks are compiled from their functions (IREE forms
the same dispatches from them) and keep their recorded names and weights.
Output that is not `ansor` IR (tuned modules, specs, libraries) comes from
the text the tuning layer produces, parsed into the pass's context.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from iree.compiler import ir

from ansor_mlir.codegen.transform_strategy import render_strategy, strategy_name
from ansor_mlir.codegen.tuning_spec import strategy_library
from ansor_mlir.core.schedule import Candidate, Family
from ansor_mlir.core.target import Target, parse_target
from ansor_mlir.core.task import Task
from ansor_mlir.dialect.ansor_ir import attributes, functions_module, i64, i64_array, strings, task_ops, tasks_module
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.program_rewrites import parse_rewrites, rewrite_program
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.mlir.context import ops_of, parse_module
from ansor_mlir.passes.pass_options import PassInvocation
from ansor_mlir.space.annotation import sample_candidate
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.options import TuneOptions
from ansor_mlir.tuning.verification import UserProgram


@dataclass(frozen=True)
class Toolkit:
    """Whole-module operations the passes are made of: `ansor_mlir.api`'s functions.

    Passed in, not imported, so that `api` can expose the pipeline without an
    import cycle. Each takes MLIR text, a target and a name for messages.
    """

    tune: Callable[..., object]  # (text, target, *, options, name, rewrites) -> result with `.module` text
    apply_best: Callable[..., str]  # (text, log, target, name, *, rewrites)
    emit_tuning_spec: Callable[..., str]
    emit_transform_library: Callable[..., str]


@dataclass(frozen=True)
class PassContext:
    """What a pass runs with: its checked options, the toolkit, and a name for the IR it runs on."""

    invocation: PassInvocation
    toolkit: Toolkit
    what: str
    # The weights archive (`.irpa` bytes, scope `model`) the program reads: a whole-program check runs with it.
    parameters: bytes = field(default=b"", repr=False)

    def program(self, module: ir.Module) -> str | UserProgram:
        """What the toolkit tunes: the module's text, with the weights it reads where it has them."""
        text = source_text(module)
        return UserProgram(text, self.what, self.parameters) if self.parameters else text

    @property
    def target(self) -> Target:
        opts = self.invocation
        return resolve_target(parse_target(str(opts["target"]), threads=int(opts["threads"]), cpu=str(opts["cpu"])))

    @property
    def rewrites(self) -> str:
        return str(self.invocation["rewrites"])

    def output(self, text: str, module: ir.Module) -> ir.Module:
        return parse_module(text, f"output of {self.invocation.name}", module.context)


def source_text(module: ir.Module) -> str:
    """The MLIR IREE compiles for a module: itself, or for `ansor` IR the module of its task functions."""
    return str(functions_module(module) if task_ops(module) else module)


def module_tasks(module: ir.Module, pc: PassContext) -> list[Task]:
    """The module's tasks; tasks recorded as `ansor.task` ops keep their names and weights."""
    recorded = {str(a["key"]): a for a in (attributes(op) for op in task_ops(module))}
    text = rewrite_program(source_text(module), parse_rewrites(pc.rewrites), pc.what).text
    tasks = extract_tasks(text, pc.target, pc.what)
    return [
        replace(task, name=str(recorded[task.key]["name"]), weight=int(recorded[task.key]["weight"]))
        if task.key in recorded else task
        for task in tasks
    ]


def rewrite_pass(module: ir.Module, pc: PassContext) -> ir.Module:
    """The linalg program the other passes tune: the input after its rewrites (unchanged where none applies)."""
    return pc.output(rewrite_program(source_text(module), parse_rewrites(pc.rewrites), pc.what).text, module)


def some_tasks(module: ir.Module, pc: PassContext) -> list[Task]:
    """The module's tasks; none is an error that says why there is nothing to tune."""
    tasks = module_tasks(module, pc)
    if not tasks:
        raise AnsorError(f"{pc.what}: nothing to tune: {why_no_task(module)}")
    return tasks


def why_no_task(module: ir.Module) -> str:
    """Why IREE forms no dispatch of a module: what its functions are."""
    for op in ops_of(module.body):
        if op.name != "func.func":
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
        types = [*ftype.inputs, *ftype.results]
        if not op.regions[0].blocks:
            return f"function {name} is a declaration (no body); give its definition"
        if any(isinstance(t, ir.MemRefType) for t in types):
            return (f"function {name} works on memrefs: ansor-mlir tunes programs on tensors, as IREE takes them; "
                    "write it on tensors (linalg on tensors)")
        if not any(isinstance(t, ir.ShapedType) for t in types):
            return f"function {name} computes on scalars only: IREE forms no dispatch of it"
    return "IREE forms no dispatch of it (no linalg op on tensors)"


def extract_tasks_pass(module: ir.Module, pc: PassContext) -> ir.Module:
    return tasks_module([(task, ()) for task in some_tasks(module, pc)], module.context)


def generate_sketches_pass(module: ir.Module, pc: PassContext) -> ir.Module:
    target = pc.target
    return tasks_module([(task, generate_sketches(task, target)) for task in some_tasks(module, pc)],
                        module.context)


def tune_options(invocation: PassInvocation) -> TuneOptions:
    """The search options an `ansor-tune` invocation sets (the others keep their defaults)."""
    return TuneOptions.from_values(dict(invocation.options))


def tune_pass(module: ir.Module, pc: PassContext) -> ir.Module:
    result = pc.toolkit.tune(pc.program(module), pc.target, options=tune_options(pc.invocation), name=pc.what,
                             rewrites=pc.rewrites)
    return pc.output(result.module, module)


def apply_best_pass(module: ir.Module, pc: PassContext) -> ir.Module:
    text = pc.toolkit.apply_best(source_text(module), pc.invocation["log"], pc.target, pc.what, rewrites=pc.rewrites)
    return pc.output(text, module)


def emit_tuning_spec_pass(module: ir.Module, pc: PassContext) -> ir.Module:
    text = pc.toolkit.emit_tuning_spec(source_text(module), pc.invocation["log"], pc.target, pc.what,
                                       rewrites=pc.rewrites)
    return pc.output(text, module)


def emit_transform_library_pass(module: ir.Module, pc: PassContext) -> ir.Module:
    text = pc.toolkit.emit_transform_library(source_text(module), pc.invocation["log"], pc.target, pc.what,
                                             rewrites=pc.rewrites)
    return pc.output(text, module)


def decisions_attr(candidate: Candidate) -> ir.DictAttr:
    """A candidate's decisions: knob name -> its values."""
    return ir.DictAttr.get({name: i64_array(values) for name, values in candidate.values})


def print_strategy_pass(module: ir.Module, pc: PassContext) -> ir.Module:
    """A library of one seeded random candidate's strategy per transform sketch (of `rule`, if given).

    Each strategy says where it comes from in `ansor.task`, `ansor.sketch`,
    `ansor.rules` and `ansor.decisions` attributes.
    """
    target = pc.target
    rng = random.Random(int(pc.invocation["seed"]))
    rule = pc.invocation["rule"]
    texts: list[str] = []
    origins: dict[str, dict[str, ir.Attribute]] = {}
    with module.context:
        for task in module_tasks(module, pc):
            for sketch in generate_sketches(task, target):
                if Family(sketch.family) != Family.TRANSFORM or (rule and rule not in sketch.rules):
                    continue
                candidate = sample_candidate(sketch, task, target, rng)
                if candidate is None:
                    continue
                name = strategy_name(task, candidate)
                texts.append(render_strategy(sketch, candidate, task, name))
                origins[name] = {"ansor.task": ir.StringAttr.get(task.name), "ansor.sketch": i64(sketch.index),
                                 "ansor.rules": strings(sketch.rules), "ansor.decisions": decisions_attr(candidate)}
        if not texts:
            warnings.warn(f"{pc.what}: no transform sketch" + (f" derived by rule {rule}" if rule else ""),
                          stacklevel=1)
        library = pc.output(strategy_library(texts), module)
        for op in ops_of(library.body):
            name = ir.StringAttr(op.attributes["sym_name"]).value if "sym_name" in op.attributes else ""
            for key, value in origins.get(name, {}).items():
                op.attributes[key] = value
    return library


PASS_FUNCTIONS: dict[str, Callable[[ir.Module, PassContext], ir.Module]] = {
    "ansor-rewrite": rewrite_pass,
    "ansor-extract-tasks": extract_tasks_pass,
    "ansor-generate-sketches": generate_sketches_pass,
    "ansor-tune": tune_pass,
    "ansor-apply-best": apply_best_pass,
    "ansor-emit-tuning-spec": emit_tuning_spec_pass,
    "ansor-emit-transform-library": emit_transform_library_pass,
    "ansor-print-strategy": print_strategy_pass,
}

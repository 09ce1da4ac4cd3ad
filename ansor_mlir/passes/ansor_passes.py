"""The `ansor-*` passes: each maps module text and options to module text."""

from __future__ import annotations

import random
from pathlib import Path

from ansor_mlir import api
from ansor_mlir.codegen.transform_strategy import render_strategy, strategy_name
from ansor_mlir.codegen.tuning_spec import strategy_library
from ansor_mlir.core.schedule import TRANSFORM_FAMILY
from ansor_mlir.core.target import Target, parse_target
from ansor_mlir.dialect import ansor_ir
from ansor_mlir.passes.pass_options import PassInvocation, int_option
from ansor_mlir.space.annotation import sample_candidate
from ansor_mlir.tuning.tuner import TuneOptions


def pass_target(invocation: PassInvocation) -> Target:
    opts = invocation.options
    return parse_target(
        opts.get("target", "llvm-cpu"),
        threads=int_option(invocation.name, opts, "threads", 1),
        cpu=opts.get("cpu", "host"),
    )


def extract_tasks_pass(text: str, name: str, invocation: PassInvocation) -> str:
    tasks = api.extract_tasks(text, pass_target(invocation), name)
    return ansor_ir.module_text([ansor_ir.task_op(task, task.func_text) for task in tasks])


def generate_sketches_pass(text: str, name: str, invocation: PassInvocation) -> str:
    target = pass_target(invocation)
    ops = []
    for task in api.extract_tasks(text, target, name):
        sketches = api.generate_sketches(task, target)
        ops.append(ansor_ir.task_op(task, "\n".join(ansor_ir.sketch_op(task, s) for s in sketches)))
    return ansor_ir.module_text(ops)


def tune_pass(text: str, name: str, invocation: PassInvocation) -> str:
    opts = invocation.options
    options = TuneOptions(
        trials=int_option(invocation.name, opts, "trials", 32),
        log=Path(opts.get("log", "ansor_tuning.jsonl")),
        seed=int_option(invocation.name, opts, "seed", 0),
        policy=opts.get("policy", "evolutionary"),
        cost_model=Path(opts["model"]) if "model" in opts else None,
        batch_size=max(1, int_option(invocation.name, opts, "batch", 8)),
        progress=int_option(invocation.name, opts, "progress", 1) != 0,
    )
    return api.tune(text, pass_target(invocation), options=options, name=name).module


def apply_best_pass(text: str, name: str, invocation: PassInvocation) -> str:
    return api.apply_best(text, invocation.options["log"], pass_target(invocation), name)


def emit_tuning_spec_pass(text: str, name: str, invocation: PassInvocation) -> str:
    return api.emit_tuning_spec(text, invocation.options["log"], pass_target(invocation), name)


def emit_transform_library_pass(text: str, name: str, invocation: PassInvocation) -> str:
    return api.emit_transform_library(text, invocation.options["log"], pass_target(invocation), name)


def print_strategy_pass(text: str, name: str, invocation: PassInvocation) -> str:
    target = pass_target(invocation)
    rng = random.Random(int_option(invocation.name, invocation.options, "seed", 0))
    rule = invocation.options.get("rule")
    strategies = []
    for task in api.extract_tasks(text, target, name):
        for sketch in api.generate_sketches(task, target):
            if sketch.family != TRANSFORM_FAMILY or (rule and rule not in sketch.rules):
                continue
            candidate = sample_candidate(sketch, task, target, rng)
            if candidate is None:
                continue
            values = ", ".join(f"{k}={list(v)}" for k, v in candidate.values)
            strategy = strategy_name(task, candidate)
            strategies.append(f"// task {task.name} sketch {sketch.index} {'+'.join(sketch.rules)}: {values}\n"
                              + render_strategy(sketch, candidate, task, strategy))
    return strategy_library(strategies)


PASS_FUNCTIONS = {
    "ansor-extract-tasks": extract_tasks_pass,
    "ansor-generate-sketches": generate_sketches_pass,
    "ansor-tune": tune_pass,
    "ansor-apply-best": apply_best_pass,
    "ansor-emit-tuning-spec": emit_tuning_spec_pass,
    "ansor-emit-transform-library": emit_transform_library_pass,
    "ansor-print-strategy": print_strategy_pass,
}


def run_pipeline(text: str, name: str, invocations: list[PassInvocation]) -> str:
    for invocation in invocations:
        text = PASS_FUNCTIONS[invocation.name](text, name, invocation)
    return text

"""Render configurations as IREE tuning specs and attach them to modules.

Two ways to hand IREE a chosen configuration, both used:
- a tuning spec (`--iree-codegen-tuning-spec-path`): a transform script whose
  matcher recognises the task's root op by structure and shape and annotates
  it with `compilation_info`; our plug-in point into ordinary IREE flows;
- `compilation_info` attached directly to the root op inside IREE's
  flow-level module, which plain `iree-compile` then builds.
"""

from __future__ import annotations

from iree.compiler import ir

from ansor_mlir.core.task import IreeConfig, Task
from ansor_mlir.frontend.task_extraction import compute_ops, dispatch_executable_key, dispatch_function
from ansor_mlir.mlir.context import indent, new_context, ops_of, parse_module

SPEC_HEADER = "module @ansor_tuning_spec attributes { transform.with_named_sequence } {\n"

APPLY_SEQUENCE = """  transform.named_sequence @ansor_apply_op_config(%op: !transform.any_op {transform.readonly},
      %config: !transform.any_param {transform.readonly}) {
    transform.annotate %op "compilation_info" = %config : !transform.any_op, !transform.any_param
    transform.yield
  }
"""


def matcher_name(task: Task) -> str:
    return f"@ansor_match_{task.key}"


def matcher_prefix(task: Task) -> str:
    """The matcher's opening: root op name check plus the structural DAG match."""
    return (
        f"  transform.named_sequence {matcher_name(task)}(%root: !transform.any_op {{transform.readonly}})"
        " -> (!transform.any_op, !transform.any_param) {\n"
        f'    transform.match.operation_name %root ["{task.root.name}"] : !transform.any_op\n'
        "    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %root {\n"
        f"{indent(task.root.matcher_text, 4)}\n"
        "    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)\n"
    )


def matcher_sequence(task: Task, config: IreeConfig) -> str:
    return (
        matcher_prefix(task)
        + f"    %config = transform.param.constant {config.compilation_info()} -> !transform.any_param\n"
        "    transform.yield %root, %config : !transform.any_op, !transform.any_param\n"
        "  }\n"
    )


def render_spec(entries: list[tuple[Task, IreeConfig]]) -> str:
    """One tuning spec applying each task's configuration (deterministic text)."""
    body = [APPLY_SEQUENCE]
    pairs = []
    for task, config in entries:
        body.append(matcher_sequence(task, config))
        pairs.append(f"{matcher_name(task)} -> @ansor_apply_op_config")
    if pairs:
        match_list = ",\n        ".join(pairs)
        entry = (
            "  transform.named_sequence @__kernel_config(%variant_op: !transform.any_op {transform.consumed})"
            " -> !transform.any_op\n      attributes { iree_codegen.tuning_spec_entrypoint } {\n"
            f"    %res = transform.foreach_match in %variant_op\n        {match_list}\n"
            "      : (!transform.any_op) -> !transform.any_op\n"
            "    transform.yield %res : !transform.any_op\n  }\n"
        )
    else:
        entry = (
            "  transform.named_sequence @__kernel_config(%variant_op: !transform.any_op {transform.consumed})"
            " -> !transform.any_op\n      attributes { iree_codegen.tuning_spec_entrypoint } {\n"
            "    transform.yield %variant_op : !transform.any_op\n  }\n"
        )
    return SPEC_HEADER + "".join(body) + entry + "}\n"


def transform_translation_info(strategy_name: str) -> str:
    return (
        "#iree_codegen.translation_info<pipeline = #iree_codegen.transform_dialect_codegen "
        f"codegen_spec = @{strategy_name}>"
    )


def strategy_library(strategies: list[str]) -> str:
    """A transform library module holding named strategies (sorted by text for determinism)."""
    body = "\n".join(indent(text.rstrip("\n"), 2) for text in strategies)
    return "module attributes { transform.with_named_sequence } {\n" + body + "\n}\n"


def attach_configs(
    flow_text: str,
    configs: dict[str, tuple[int, IreeConfig]],
    what: str,
    strategies: dict[str, tuple[str, str]] | None = None,
) -> tuple[str, list[str]]:
    """Attach each tuned dispatch's codegen choice inside IREE's flow-level module.

    `configs` maps a workload key to (root index, config): `compilation_info`
    goes on the root op. `strategies` maps a key to (strategy name, strategy
    text): the dispatch function gets a `transform_dialect_codegen`
    translation_info naming the strategy, and the strategy itself is carried
    in a nested transform module inside the dispatch's module, where IREE's
    interpreter finds it (no `--iree-codegen-transform-dialect-library`
    needed). Returns the new module text and the keys that were applied.
    """
    strategies = strategies or {}
    ctx = new_context()
    module = parse_module(flow_text, what, ctx)
    applied = []
    for exe in ops_of(module.body):
        if exe.name != "flow.executable":
            continue
        key = dispatch_executable_key(exe, ctx)
        if key is None or (key not in configs and key not in strategies):
            continue
        func = dispatch_function(exe)
        if key in strategies:
            name, text = strategies[key]
            func.attributes["translation_info"] = ir.Attribute.parse(transform_translation_info(name), ctx)
            holder = parse_module(f"module {{\n{strategy_library([text])}}}", f"strategy {name}", ctx)
            nested = ops_of(holder.body)[0]
            nested.detach_from_parent()
            ir.InsertionPoint(func.parent.regions[0].blocks[0]).insert(nested)
        else:
            root_index, config = configs[key]
            ops = compute_ops(func)
            ops[root_index].attributes["compilation_info"] = ir.Attribute.parse(
                config.compilation_info(), ctx
            )
        applied.append(key)
    return str(module), applied


def render_library(entries: list[tuple[Task, str, str]]) -> str:
    """A transform library: each (task, strategy name, strategy text) plus a `@__kernel_config`.

    The entry point matches a task's root op by name and structure (as the
    tuning spec does) and sets its dispatch function's translation_info to
    the task's strategy.
    """
    body = []
    pairs = []
    for task, name, text in entries:
        body.append(
            matcher_prefix(task)
            + f"    %config = transform.param.constant {transform_translation_info(name)} -> !transform.any_param\n"
            "    transform.yield %root, %config : !transform.any_op, !transform.any_param\n  }\n"
        )
        body.append(indent(text.rstrip("\n"), 2) + "\n")
        pairs.append(f"{matcher_name(task)} -> @ansor_apply_strategy")
    match_list = ",\n        ".join(pairs)
    apply = (
        "  transform.named_sequence @ansor_apply_strategy(%op: !transform.any_op {transform.readonly},\n"
        "      %config: !transform.any_param {transform.readonly}) {\n"
        '    %func = transform.get_parent_op %op <{op_name = "func.func"}> : (!transform.any_op) -> !transform.any_op\n'
        '    transform.annotate %func "translation_info" = %config : !transform.any_op, !transform.any_param\n'
        "    transform.yield\n  }\n"
    )
    entry = (
        "  transform.named_sequence @__kernel_config(%variant_op: !transform.any_op {transform.consumed})"
        " -> !transform.any_op {\n"
        + (f"    %res = transform.foreach_match in %variant_op\n        {match_list}\n"
           "      : (!transform.any_op) -> !transform.any_op\n    transform.yield %res : !transform.any_op\n  }\n"
           if pairs else "    transform.yield %variant_op : !transform.any_op\n  }\n")
    )
    return "module @ansor_transform_library attributes { transform.with_named_sequence } {\n" + apply + "".join(
        body) + entry + "}\n"

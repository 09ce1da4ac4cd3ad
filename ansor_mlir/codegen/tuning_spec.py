"""Build IREE tuning specs and transform libraries, and attach configurations to modules.

Two ways to hand IREE a chosen configuration, both used:
- a tuning spec (`--iree-codegen-tuning-spec-path`): a transform script whose
  matcher recognises the task's root op by structure and shape and annotates
  it with `compilation_info`, or, for a transform-dialect strategy, carries
  the strategy and runs it on the matched dispatch; our plug-in point into
  ordinary IREE flows;
- `compilation_info` attached directly to the root op inside IREE's
  flow-level module, which plain `iree-compile` then builds.

Specs and libraries are built with the bindings' transform builders, as
IREE's own tuner builds its specs (`amdsharktuner/spec_builder.py`): an
annotating sequence, one matcher per task, and a `@__kernel_config` entry
point that pairs them with `transform.foreach_match`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from iree.compiler import ir
from iree.compiler.dialects import builtin, preprocessing_transform, transform
from iree.compiler.dialects.transform import structured

from ansor_mlir.codegen.iree_config import compilation_info, follower_lowering_config, strategy_translation_info
from ansor_mlir.core.task import IreeConfig, Task
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.task_extraction import compute_ops, dispatch_executable_key, dispatch_function
from ansor_mlir.mlir import generic_op
from ansor_mlir.mlir.context import new_context, ops_of, parse_module, print_op, shared_context, verify, walk
from ansor_mlir.mlir.generic_op import WITH_NAMED_SEQUENCE, transform_library

READONLY = "transform.readonly"
CONSUMED = "transform.consumed"
APPLY_CONFIG = "ansor_apply_op_config"
APPLY_STRATEGY = "ansor_apply_strategy"
ENTRY_POINT = "__kernel_config"
# Transform ops with no Python builder: IREE's clone of a spec symbol into a payload symbol table, and the
# structured-op matchers a strategy's matcher checks the dispatch's epilogue with.
IMPORT_SYMBOL = "transform.util.import_symbol"
MATCH_STRUCTURED = "transform.match.structured"
MATCH_STRUCTURED_YIELD = "transform.match.structured.yield"
MATCH_RESULT = "transform.match.structured.result"
MATCH_NUM_INPUTS = "transform.match.structured.num_inputs"
# What a task function's return is in its dispatch.
DISPATCH_STORE = "iree_tensor_ext.dispatch.tensor.store"


def matcher_name(task: Task) -> str:
    """Symbol name of the sequence that matches the task's root op."""
    return f"ansor_match_{task.key}"


def match_task_root(handle: ir.Value, task: Task) -> None:
    """Check that `handle` is the task's root op (`match_root` on it, from the task's function); a root IREE's
    matcher cannot recognise (`unmatchable`) is an AnsorError."""
    module = parse_module(task.func_text, f"task {task.name}", ir.Context.current)
    root = compute_ops(ops_of(module.body)[0])[task.root_index]
    why = _unmatchable_root(root)
    if why:
        raise AnsorError(f"task {task.name}: a tuning spec cannot match its root op: {why}")
    match_root(handle, root)


def match_dispatch_tail(root: ir.Value, task: Task) -> None:
    """Check that the ops consuming `root`'s result in its dispatch are the task's, up to the store.

    A strategy is written for its dispatch's linalg ops (it splits them into
    exactly that many handles), and the same root op recurs in dispatches
    that fuse another epilogue (a residual add after a convolution), where
    the strategy fails: following the single user of each result, each
    consumer must have the task's op name and number of inputs, and the last
    must feed the dispatch's store. Regions are not compared (an epilogue's
    ReLU zero is a value of the dispatch function, which IREE's DAG matcher
    cannot compare).
    """
    i64 = ir.IntegerType.get_signless(64)
    handle = root
    for name, inputs in _consumer_chain(task):
        with ir.Location.name("user"):
            (handle,) = _match_structured(handle, 1, lambda op: [generic_op.op(
                MATCH_RESULT, [op], [transform.AnyOpType.get()],
                {"position": ir.IntegerAttr.get(i64, 0), "single": ir.UnitAttr.get()}).result])
        transform.MatchOperationNameOp(handle, [name])
        if inputs is not None:
            _match_structured(handle, 0, lambda op, n=inputs: _match_inputs(op, n))


def _match_inputs(op: ir.Value, count: int) -> list[ir.Value]:
    """Inside `transform.match.structured`: the op has `count` inputs."""
    count_type = transform.ParamType.get(ir.IntegerType.get_signless(64))
    with ir.Location.name("inputs"):
        inputs = generic_op.op(MATCH_NUM_INPUTS, [op], [count_type]).result
    with ir.Location.name("expected"):
        expected = transform.ParamConstantOp(count_type, ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                                           count)).result
    transform.MatchParamCmpIOp(inputs, expected, transform.MatchCmpIPredicate.eq)
    return []


def _match_structured(handle: ir.Value, results: int, body: Callable[[ir.Value], list[ir.Value]]) -> list[ir.Value]:
    """`transform.match.structured` on `handle` (a linalg op): `body(%op)` checks it and returns the `results`
    handles to yield, which this returns."""
    any_op = transform.AnyOpType.get()
    match = generic_op.op(MATCH_STRUCTURED, [handle], [any_op] * results, regions=1)
    block = match.regions[0].blocks.append(any_op)
    with ir.InsertionPoint(block):
        generic_op.op(MATCH_STRUCTURED_YIELD, body(block.arguments[0]))
    return list(match.results)


def _consumer_chain(task: Task) -> list[tuple[str, int | None]]:
    """From the task's root, each single user of the previous op's result: (op name, inputs) for a linalg op,
    (the dispatch's store, None) for the function's return; stops where a result has other users."""
    module = parse_module(task.func_text, f"task {task.name}", ir.Context.current)
    op = compute_ops(ops_of(module.body)[0])[task.root_index]
    chain: list[tuple[str, int | None]] = []
    while len(op.results) == 1 and len(users := list(op.results[0].uses)) == 1:
        op = users[0].owner
        if op.name == "func.return":
            chain.append((DISPATCH_STORE, None))
            break
        if not op.name.startswith("linalg."):
            break
        chain.append((op.name, len(op.operands) - len(op.results)))
    return chain


def unmatchable(task: Task) -> str | None:
    """Why a tuning spec cannot recognise the task's root op in a program, or None when it can."""
    module = parse_module(task.func_text, f"task {task.name}", new_context())
    return _unmatchable_root(compute_ops(ops_of(module.body)[0])[task.root_index])


def _unmatchable_root(root: ir.Operation) -> str | None:
    """IREE's DAG matcher compares the root's body value by value, mapping only values defined in the DAG: a body
    that uses a value of the enclosing function (the zero of a fused ReLU, say) matches no payload op."""
    defined: list[ir.Value] = [arg for region in root.regions for block in region.blocks for arg in block.arguments]
    used: list[ir.Value] = []
    for op in walk(root):
        defined += list(op.results)
        used += list(op.operands)
        defined += [arg for inner in op.regions for b in inner.blocks for arg in b.arguments]
    captured: list[ir.Value] = []
    for value in used:
        if value not in defined and value not in captured:
            captured.append(value)
    if not captured:
        return None
    return (f"its body uses {len(captured)} value(s) defined outside it (such as {captured[0].get_name()}), which "
            "IREE's DAG matcher cannot compare")


def match_root(handle: ir.Value, root: ir.Operation) -> None:
    """Check that `handle` is an op like `root`: its name, then its structure and shapes.

    The DAG matcher's body is a copy of `root` whose operands are the body's
    arguments (one per distinct operand): IREE matches payload ops whose
    operands are cast-compatible with those.
    """
    transform.MatchOperationNameOp(handle, [root.name])
    operands: list[ir.Value] = []
    for value in root.operands:
        if value not in operands:
            operands.append(value)
    any_value = transform.AnyValueType.get()
    dag = preprocessing_transform.MatchCastCompatibleDagFromRootOp(any_value, any_value, handle)
    body = dag.regions[0].blocks.append(*[value.type for value in operands])
    copy = root.clone(ip=ir.InsertionPoint(body))
    for position, value in enumerate(root.operands):
        copy.operands[position] = body.arguments[operands.index(value)]
    transform.YieldOp([], ip=ir.InsertionPoint(body))


def root_signature(task: Task, whole_dispatch: bool = False) -> tuple:
    """The task's root op as its matcher compares it (`match_root`): op names, attributes, types and the body,
    with each value by its order of first use, so tasks with one signature are one matcher to IREE. With
    `whole_dispatch` (a strategy's matcher), the consumers `match_dispatch_tail` checks too."""
    module = parse_module(task.func_text, f"task {task.name}", new_context())
    root = compute_ops(ops_of(module.body)[0])[task.root_index]
    values: list[ir.Value] = []

    def number(value: ir.Value) -> int:
        if value not in values:
            values.append(value)
        return values.index(value)

    def structure(op: ir.Operation) -> tuple:
        op = op.operation
        attributes = op.attributes
        named = sorted((attributes[i].name, str(attributes[i].attr)) for i in range(len(attributes)))
        operands = tuple(number(v) for v in op.operands)
        blocks = tuple((tuple((number(a), str(a.type)) for a in block.arguments),
                        tuple(structure(inner) for inner in block.operations))
                       for region in op.regions for block in region.blocks)
        return (op.name, tuple(named), operands,
                tuple(str(v.type) for v in op.operands), tuple((number(r), str(r.type)) for r in op.results), blocks)

    return structure(root) + ((tuple(_consumer_chain(task)),) if whole_dispatch else ())


def spec_order(entries: Sequence[tuple[Task, IreeConfig]], strategies: Sequence[tuple[Task, str, str]] = (),
               ) -> tuple[list[tuple[Task, IreeConfig]], list[tuple[Task, str, str]]]:
    """The order a spec tries its matchers in: configurations, then strategies, each by task key. Every spec
    of the same choices is one text, whoever builds it (`render_spec`, `spec_coverage`)."""
    return sorted(entries, key=lambda e: e[0].key), sorted(strategies, key=lambda e: e[0].key)


def spec_coverage(tasks: Sequence[Task], configured: Sequence[Task], with_strategy: Sequence[Task] = (),
                  ) -> dict[str, str]:
    """Which entry of a spec configures each task's dispatch: task key -> the key of the entry's task.

    `transform.foreach_match` gives each op the first matcher that succeeds on
    it, so an entry also configures every other task whose root op it
    matches: the four phases of a decomposed transposed convolution are four
    dispatches with one root op, and the whole-program check timed one
    phase's entry on all four. Attaching configurations to the flow-level
    module (`attach_configs`) builds the same program only when it follows
    this.
    """
    order = [(t, False) for t in sorted(configured, key=lambda t: t.key)]
    order += [(t, True) for t in sorted(with_strategy, key=lambda t: t.key)]
    kinds = {whole for _, whole in order}
    signatures = {(t.key, whole): root_signature(t, whole) for t in tasks for whole in kinds}
    coverage = {}
    for task in tasks:
        first = next((entry.key for entry, whole in order
                      if signatures[entry.key, whole] == signatures[task.key, whole]), None)
        if first is not None:
            coverage[task.key] = first
    return coverage


def spec_sources(tasks: Sequence[Task], strategy_by_key: dict[str, bool]) -> dict[str, str]:
    """Task key -> the key of the task whose choice its dispatch gets from a spec with an entry for each key of
    `strategy_by_key` (True: a strategy, False: a configuration): its own or another's (`spec_coverage`). A
    task the spec cannot match (`unmatchable`) keeps its own: attached to its dispatch, it is built all the same."""
    own = [task for task in tasks if task.key in strategy_by_key]
    matchable = [task for task in own if unmatchable(task) is None]
    sources = {task.key: task.key for task in own}
    return sources | spec_coverage(tasks, [t for t in matchable if not strategy_by_key[t.key]],
                                   [t for t in matchable if strategy_by_key[t.key]])


def render_spec(
    entries: Sequence[tuple[Task, IreeConfig]], strategies: Sequence[tuple[Task, str, str]] = ()
) -> str:
    """One tuning spec applying each task's configuration and each (task, strategy name, strategy text).

    A configuration goes on the root op (`compilation_info`). A strategy
    travels in the spec itself, in a module of its own: its matcher points
    the dispatch function's translation_info at the strategy, as a library's
    `@__kernel_config` does, and after matching the entry point copies that
    module into the dispatch's module (`transform.util.import_symbol`), where
    IREE's transform-dialect pipeline finds the strategy, as it finds one
    attached at the flow level. So the strategy runs where a tuning run
    measured it, after IREE's codegen preprocessing: run from the spec's
    entry point it saw the dispatch before that (a batchless convolution
    without the unit batch dimension IREE inserts later) and crashed IREE.
    `iree-compile --iree-codegen-tuning-spec-path=SPEC` alone builds the
    tuned program (with `--mlir-disable-threading` against an IREE 3.13 hang,
    `mlir.iree_compiler.tuning_spec_flags`). Deterministic text, its matchers
    in `spec_order` whatever the order given.
    """
    entries, strategies = spec_order(entries, strategies)
    with shared_context() as ctx, ir.Location.unknown():
        parsed = transform_library([text for _, _, text in strategies], "strategies", ctx)
        spec = _library("ansor_tuning_spec")
        with ir.InsertionPoint(spec.body):
            _apply_sequence(APPLY_CONFIG, "compilation_info", parent=None)
            if strategies:
                _apply_sequence(APPLY_STRATEGY, "translation_info", parent="func.func")
            for task, config in entries:
                _matcher_sequence(task, compilation_info(config))
            for (task, name, _), strategy in zip(strategies, ops_of(parsed.body), strict=True):
                _matcher_sequence(task, strategy_translation_info(name), whole_dispatch=True)
                holder = _library(strategy_module_name(name), nested=True)
                strategy.clone(ip=ir.InsertionPoint(holder.body))
            pairs = [(matcher_name(task), APPLY_CONFIG) for task, _ in entries]
            pairs += [(matcher_name(task), APPLY_STRATEGY) for task, _, _ in strategies]
            _entry_sequence(pairs, tuning_entrypoint=True, carry=[name for _, name, _ in strategies])
        verify(spec.operation, "tuning spec")
        return print_op(spec.operation)


def render_library(entries: Sequence[tuple[Task, str, str]]) -> str:
    """A transform library: each (task, strategy name, strategy text) plus a `@__kernel_config`.

    The entry point matches a task's root op by name and structure (as the
    tuning spec does) and sets its dispatch function's translation_info to
    the task's strategy.
    """
    with shared_context() as ctx, ir.Location.unknown():
        parsed = transform_library([text for _, _, text in entries], "strategies", ctx)
        strategies = ops_of(parsed.body)
        library = _library("ansor_transform_library")
        with ir.InsertionPoint(library.body):
            _apply_sequence(APPLY_STRATEGY, "translation_info", parent="func.func")
            for (task, name, _), strategy in zip(entries, strategies, strict=True):
                _matcher_sequence(task, strategy_translation_info(name), whole_dispatch=True)
                strategy.clone()
            _entry_sequence([(matcher_name(task), APPLY_STRATEGY) for task, _, _ in entries], tuning_entrypoint=False)
        verify(library.operation, "transform library")
        return print_op(library.operation)


def strategy_library(strategies: Sequence[str]) -> str:
    """A transform library module holding printed strategies, in the given order."""
    with shared_context() as ctx:
        return print_op(transform_library(strategies, "strategies", ctx).operation)


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
    with ctx, ir.Location.unknown():
        for exe in ops_of(module.body):
            if exe.name != "flow.executable":
                continue
            key = dispatch_executable_key(exe, ctx)
            if key is None or (key not in configs and key not in strategies):
                continue
            func = dispatch_function(exe)
            if key in strategies:
                name, text = strategies[key]
                func.attributes["translation_info"] = strategy_translation_info(name)
                holder = transform_library([text], f"strategy {name}", ctx)
                holder.operation.clone(ip=ir.InsertionPoint(func.parent.regions[0].blocks[0]))
            else:
                root_index, config = configs[key]
                ops = compute_ops(func)
                ops[root_index].attributes["compilation_info"] = compilation_info(config)
                for op in (op for i, op in enumerate(ops) if i != root_index):
                    follower = follower_lowering_config(config, _loop_count(op))
                    if follower is not None:
                        op.attributes["lowering_config"] = follower
            applied.append(key)
    return str(module), applied


def _loop_count(op: ir.Operation) -> int:
    """Loops of a `linalg.generic` (its iterator types); 0 for a named op, which gets no follower config."""
    return len(ir.ArrayAttr(op.attributes["iterator_types"])) if "iterator_types" in op.attributes else 0


def strategy_module_name(strategy: str) -> str:
    """Symbol of the spec's module holding strategy `@strategy`, the unit copied into a dispatch's module."""
    return f"{strategy}_module"


def _library(name: str, nested: bool = False) -> ir.Module | builtin.ModuleOp:
    """A transform library module: top-level, or (`nested`) inside the module at the insertion point."""
    module = builtin.ModuleOp() if nested else ir.Module.create()
    module.operation.attributes["sym_name"] = ir.StringAttr.get(name)
    module.operation.attributes[WITH_NAMED_SEQUENCE] = ir.UnitAttr.get()
    return module


def _sequence(name: str, inputs: Sequence[tuple[str, ir.Type, str]], results: Sequence[ir.Type],
              body: Callable[..., None]) -> transform.NamedSequenceOp:
    """A named sequence whose arguments are (name, type, READONLY/CONSUMED); `body(*args)` fills it."""
    sequence = transform.NamedSequenceOp(name, [t for _, t, _ in inputs], list(results),
                                         arg_attrs=[{effect: ir.UnitAttr.get()}
                                                    for _, _, effect in inputs])
    args = list(sequence.body.arguments)
    for arg, (arg_name, _, _) in zip(args, inputs, strict=True):
        arg.set_location(ir.Location.name(arg_name))
    with ir.InsertionPoint(sequence.body):
        body(*args)
    return sequence


def _apply_sequence(name: str, attribute: str, parent: str | None) -> None:
    """`@name(%op, %config)`: annotate `%op` (or its `parent` op) with `attribute = %config`."""
    any_op, any_param = transform.AnyOpType.get(), transform.AnyParamType.get()

    def body(op: ir.Value, config: ir.Value) -> None:
        if parent is not None:
            with ir.Location.name("func"):
                op = transform.GetParentOp(any_op, op, op_name=parent).result
        transform.AnnotateOp(op, attribute, param=config)
        transform.YieldOp([])

    _sequence(name, [("op", any_op, READONLY), ("config", any_param, READONLY)], [], body)


def _matcher_sequence(task: Task, config: ir.Attribute, whole_dispatch: bool = False) -> None:
    """`@ansor_match_<key>(%root)`: succeeds on the task's root op (followed by the task's epilogue, with
    `whole_dispatch`) and yields it with `config`."""
    any_op, any_param = transform.AnyOpType.get(), transform.AnyParamType.get()

    def body(root: ir.Value) -> None:
        match_task_root(root, task)
        if whole_dispatch:
            match_dispatch_tail(root, task)
        with ir.Location.name("config"):
            param = transform.ParamConstantOp(any_param, config).result
        transform.YieldOp([root, param])

    _sequence(matcher_name(task), [("root", any_op, READONLY)], [any_op, any_param], body)


def _entry_sequence(pairs: Sequence[tuple[str, str]], tuning_entrypoint: bool, carry: Sequence[str] = ()) -> None:
    """`@__kernel_config(%variant_op)`: run each (matcher, action) pair over the variant, then copy the module of
    each strategy of `carry` into the dispatch modules of the functions the matchers pointed at it."""
    any_op = transform.AnyOpType.get()

    def body(variant: ir.Value) -> None:
        if pairs:
            with ir.Location.name("res"):
                variant = transform.ForeachMatchOp(any_op, [], variant, [], [m for m, _ in pairs],
                                                   [a for _, a in pairs]).updated
        for name in carry:
            _carry_strategy(variant, name)
        transform.YieldOp([variant])

    sequence = _sequence(ENTRY_POINT, [("variant_op", any_op, CONSUMED)], [any_op], body)
    if tuning_entrypoint:
        sequence.operation.attributes["iree_codegen.tuning_spec_entrypoint"] = ir.UnitAttr.get()


def _carry_strategy(variant: ir.Value, name: str) -> None:
    """Copy the module of strategy `@name` into the module of every function whose translation_info names it.

    IREE's transform-dialect pipeline looks the strategy up in the dispatch's
    module; nested in a module of its own, it is not taken for a second
    function of the dispatch.
    """
    any_op = transform.AnyOpType.get()
    with ir.Location.name("funcs"):
        funcs = structured.MatchOp(any_op, variant, ops=["func.func"],
                                   op_attrs={"translation_info": strategy_translation_info(name)}).result
    loop = transform.ForeachOp([], [funcs])
    func = loop.body.arguments[0]
    func.set_location(ir.Location.name("func"))
    with ir.InsertionPoint(loop.body):
        with ir.Location.name("module"):
            module = transform.GetParentOp(any_op, func, op_name="builtin.module").result
        with ir.Location.name("strategy"):
            generic_op.op(IMPORT_SYMBOL, [module], [any_op],
                          {"symbol": ir.FlatSymbolRefAttr.get(strategy_module_name(name)),
                           "if_undefined": ir.UnitAttr.get()})
        transform.YieldOp([])

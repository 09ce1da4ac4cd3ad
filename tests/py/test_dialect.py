"""The `ansor` dialect: tasks and sketches built with the bindings verify under IRDL, round-trip and read back."""

from __future__ import annotations

import subprocess

import pytest
from iree.compiler import ir
from iree.compiler.tools.binaries import find_tool

from ansor_mlir.core.affine import AffineMap
from ansor_mlir.core.schedule import (
    ChoiceKnob,
    ConfigurePipeline,
    Family,
    Sketch,
    TileAndFuse,
    TileKnob,
    UseIreeDefault,
)
from ansor_mlir.core.task import IreeConfig, RootOp, Task
from ansor_mlir.dialect import ansor_ir
from ansor_mlir.dialect.verify import irdl_error
from ansor_mlir.errors import AnsorError
from ansor_mlir.passes.source import new_context

T = "tensor<64x64xf32>"
FUNC = f"""func.func @task(%a: {T}, %b: {T}) -> {T} {{
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : {T}
  %1 = linalg.fill ins(%cst : f32) outs(%0 : {T}) -> {T}
  %2 = linalg.matmul ins(%a, %b : {T}, {T}) outs(%1 : {T}) -> {T}
  return %2 : {T}
}}"""
DEFAULT = IreeConfig(
    pipeline="DoubleTilingExpert",
    levels=(
        ("distribution", (32, 32, 0)),
        ("vector_common_parallel", (8, 16, 0)),
        ("vector_reduction", (0, 0, 4)),
    ),
)
SPATIAL = ("distribution", "cache_parallel", "vector_common_parallel")
REDUCTION = ("cache_reduction", "vector_reduction")
NAME = 'mm "64" \\ dispatch'  # quotes and backslashes: the bindings escape them, not us


def make_task() -> Task:
    root = RootOp(
        name="linalg.matmul",
        loop_extents=(64, 64, 64),
        iterator_types=("parallel", "parallel", "reduction"),
        indexing_maps=tuple(AffineMap.projection(3, dims) for dims in ((0, 2), (2, 1), (0, 1))),
        operand_types=(T, T, T),
        element_type="f32",
        element_bytes=4,
        body_ops=("arith.mulf", "arith.addf"),
    )
    return Task(
        key="0123456789abcdef",
        name=NAME,
        func_text=FUNC,
        func_name="task",
        input_types=(T, T),
        output_types=(T,),
        ops=("linalg.fill", "linalg.matmul"),
        root=root,
        root_index=0,
        flops=2 * 64**3,
        weight=3,
        default_config=DEFAULT,
    )


def make_sketches(task: Task) -> list[Sketch]:
    """IREE's default, a pipeline sketch with tile knobs, and a transform sketch with a padded knob and a choice."""
    zero = Sketch(task.key, 0, Family.PIPELINE, DEFAULT.pipeline, tuple(name for name, _ in DEFAULT.levels),
                  (UseIreeDefault(config=DEFAULT),), ("iree-default",))
    knobs = (
        TileKnob("d0", 0, 64, SPATIAL),
        TileKnob("d1", 1, 64, SPATIAL),
        TileKnob("d2", 2, 64, REDUCTION),
    )
    levels = ("distribution", "cache_parallel", "cache_reduction", "vector_common_parallel", "vector_reduction")
    tiled = Sketch(task.key, 1, Family.PIPELINE, "DoubleTilingExpert", levels,
                   (ConfigurePipeline(knobs, "DoubleTilingExpert"),), ("multi-level-tiling-cached",))
    strategy = Sketch(task.key, 2, Family.TRANSFORM, "TransformDialectCodegen", ("distribution", "vector_reduction"),
                      (TileAndFuse((TileKnob("d1", 1, 64, ("distribution", "vector_common_parallel"), padded=True),
                                    ChoiceKnob("lowering", ("outerproduct", "dot")))),),
                      ("td-multi-level-tiling", "padding"))
    return [zero, tiled, strategy]


def build(context: ir.Context | None = None) -> ir.Module:
    """One bare task and the same task with its sketches."""
    task = make_task()
    return ansor_ir.tasks_module([(task, ()), (task, make_sketches(task))], context or new_context())


def iree_opt(text: str) -> subprocess.CompletedProcess:
    tool = find_tool("iree-opt")
    assert tool, "iree-opt not found"
    return subprocess.run([tool, f"--irdl-file={ansor_ir.IRDL_PATH}", "-"], input=text, capture_output=True,
                          text=True, timeout=120, check=False)


def test_built_ir_verifies_under_irdl():
    text = str(build())
    result = iree_opt(text)
    assert result.returncode == 0, result.stderr
    for op in ("ansor.task", "ansor.sketch", "ansor.knob", "ansor.choice", "ansor.compilation_info", "ansor.strategy"):
        assert f'"{op}"' in result.stdout


def test_printing_is_deterministic_and_round_trips():
    text = str(build())
    assert text == str(build())
    reparsed = ir.Module.parse(text, new_context())
    assert str(reparsed) == text


def test_attributes_are_typed():
    text = str(build())
    assert "loop_extents = array<i64: 64, 64, 64>" in text
    assert 'name = "mm \\2264\\22 \\\\ dispatch"' in text  # MLIR's escapes, read back exactly (below)
    assert 'iterator_types = ["parallel", "parallel", "reduction"]' in text
    assert 'kind = "R", levels = ["cache_reduction", "vector_reduction"], name = "d2", padded = false}' in text
    assert 'padded = true' in text and '"ansor.choice"() {name = "lowering", options = ["outerproduct", "dot"]}' in text
    assert 'sequence = "ansor_sketch_0123456789abcdef_s1"' in text
    assert 'strategy = "ansor_strategy_0123456789abcdef_s2"' in text
    assert "transform.param.constant #" in text  # sketch zero: IREE's configuration as a typed attribute


def test_sketch_body_is_the_tuning_spec_matcher():
    module = build()
    (sketch, *_) = [op for op in ansor_ir.walk(module.body) if op.name == ansor_ir.SKETCH]
    names = [op.name for op in sketch.regions[0].blocks[0].operations]
    assert names == ["transform.match.operation_name", "transform.iree.match.cast_compatible_dag_from_root",
                     "transform.param.constant", "transform.yield"]
    root = sketch.regions[0].blocks[0].arguments[0]
    assert all(op.operands[0] == root for op in list(sketch.regions[0].blocks[0].operations)[:2])


def test_task_function_sits_in_a_module():
    module = build()
    first = ansor_ir.task_ops(module)[0]
    names = [op.name for op in first.regions[0].blocks[0].operations]
    assert names == ["builtin.module", "transform.yield"]
    assert ansor_ir.task_function(first).name == "func.func"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("extent = 64 : i64, ", "", 'attribute "extent" is expected but not provided'),
        ('kind = "R"', 'kind = "X"', "does not satisfy the constraint"),
        ("extent = 64 : i64", 'extent = "64"', "expected base attribute 'builtin.integer'"),
        ("padded = false", "padded = 1 : i64", "does not satisfy the constraint"),
        ("loop_extents = array<i64: 64, 64, 64>", "loop_extents = [64, 64, 64]",
         "expected base attribute 'builtin.dense_array'"),
        ('family = "pipeline"', 'family = "other"', "does not satisfy the constraint"),
        ("      transform.yield %arg0,",
         '      %bad = "ansor.knob"() {dim = 0 : i64, extent = 8 : i64, kind = "S", levels = [], name = "b", '
         "padded = false} : () -> !transform.any_op\n      transform.yield %arg0,",
         "expected '!transform.any_param' but got '!transform.any_op'"),
        ("^bb0(%arg0: !transform.any_op):", "^bb0(%arg0: !transform.any_op, %extra: !transform.any_op):",
         "expected region 0 to have 1 arguments but got 2"),
    ],
)
def test_broken_ops_are_rejected(old, new, message):
    text = str(build())
    assert old in text
    result = iree_opt(text.replace(old, new, 1))
    assert result.returncode != 0
    assert message in result.stderr


def test_irdl_error_names_the_line():
    text = str(build())
    assert irdl_error(text) is None
    broken = text.replace('kind = "R"', 'kind = "X"', 1)
    line = next(n for n, row in enumerate(broken.splitlines(), start=1) if 'kind = "X"' in row)
    error = irdl_error(broken)
    assert error is not None and error.line == line and "does not satisfy the constraint" in error.message


def test_read_task_ops_round_trips_attributes():
    task = make_task()
    bare, with_sketches = ansor_ir.read_task_ops(str(build()))
    for read in (bare, with_sketches):
        assert read["key"] == task.key and read["name"] == NAME
        assert (read["weight"], read["flops"], read["root_index"]) == (3, 2 * 64**3, 0)
        assert read["root"] == "linalg.matmul" and read["pipeline"] == "DoubleTilingExpert"
        assert read["loop_extents"] == [64, 64, 64]
        assert read["iterator_types"] == ["parallel", "parallel", "reduction"]
        assert read["func"] is not None and "linalg.matmul" in read["func"]
    assert bare["sketches"] == []

    zero, tiled, strategy = with_sketches["sketches"]
    assert zero["index"] == 0 and zero["knobs"] == [] and zero["levels"] is None
    assert zero["rules"] == ["iree-default"] and zero["family"] == "pipeline"
    assert zero["fixed_config"].startswith("#iree_codegen.compilation_info<")
    assert zero["sequence"] == f"ansor_sketch_{task.key}_s0"

    sketch = make_sketches(task)[1]
    assert tiled["task"] == task.key and tiled["pipeline"] == sketch.pipeline
    assert tiled["rules"] == list(sketch.rules) and tiled["levels"] == list(sketch.levels)
    assert tiled["fixed_config"] is None
    assert tiled["knobs"] == [
        {"name": k.name, "dim": k.dim, "extent": k.extent, "kind": k.kind, "levels": list(k.levels), "padded": False}
        for k in sketch.knobs
    ]
    assert strategy["family"] == "transform" and strategy["levels"] == ["distribution", "vector_reduction"]
    assert strategy["knobs"][0]["padded"] is True
    assert strategy["knobs"][1] == {"name": "lowering", "options": ["outerproduct", "dot"]}


def test_functions_module_names_each_function_after_its_task():
    task = make_task()
    other = Task(**{**task.__dict__, "key": "fedcba9876543210"})
    module = ansor_ir.tasks_module([(task, ()), (task, make_sketches(task)), (other, ())], new_context())
    functions = ansor_ir.functions_module(module)
    ops = [op.operation for op in functions.body.operations]
    assert [op.name for op in ops] == ["func.func", "func.func"]  # the same task twice is compiled once
    assert [ir.StringAttr(op.attributes["sym_name"]).value for op in ops] == [NAME, NAME + "_1"]
    functions.operation.verify()


def test_reading_bad_text_is_an_ansor_error():
    with pytest.raises(AnsorError):
        ansor_ir.read_task_ops('"ansor.task"() ({')


def test_sketch_of_another_task_is_refused():
    task = make_task()
    other = Sketch("ffff", 0, Family.PIPELINE, "x", (), ())
    with pytest.raises(ValueError):
        ansor_ir.tasks_module([(task, [other])], new_context())


def test_extracted_task_sketches_verify(small_task, target):
    from ansor_mlir.space.sketch_rules import generate_sketches

    sketches = generate_sketches(small_task, target)
    assert any(s.knobs for s in sketches) and any(not s.knobs for s in sketches)
    assert {Family(s.family) for s in sketches} == {Family.PIPELINE, Family.TRANSFORM}
    text = str(ansor_ir.tasks_module([(small_task, sketches)], new_context()))
    result = iree_opt(text)
    assert result.returncode == 0, result.stderr
    (read,) = ansor_ir.read_task_ops(text)
    assert read["key"] == small_task.key
    assert [s["index"] for s in read["sketches"]] == [s.index for s in sketches]

"""The `ansor` dialect: printed tasks and sketches verify under IRDL and read back."""

from __future__ import annotations

import subprocess

import pytest
from iree.compiler.tools.binaries import find_tool

from ansor_mlir.core.affine import AffineMap
from ansor_mlir.core.schedule import Sketch, TileKnob
from ansor_mlir.core.task import IreeConfig, RootOp, Task
from ansor_mlir.dialect import ansor_ir
from ansor_mlir.errors import AnsorError

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
        name='mm "64" \\ dispatch',
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
    zero = Sketch(
        task_key=task.key,
        index=0,
        pipeline=DEFAULT.pipeline,
        levels=tuple(name for name, _ in DEFAULT.levels),
        knobs=(),
        rules=("iree-default",),
        fixed_config=DEFAULT,
    )
    spatial = ("distribution", "cache_parallel", "vector_common_parallel")
    reduction = ("cache_reduction", "vector_reduction")
    knobs = (
        TileKnob(name="d0", dim=0, extent=64, levels=spatial),
        TileKnob(name="d1", dim=1, extent=64, levels=spatial),
        TileKnob(name="d2", dim=2, extent=64, levels=reduction),
    )
    tiled = Sketch(
        task_key=task.key,
        index=1,
        pipeline="DoubleTilingExpert",
        levels=(
            "distribution",
            "cache_parallel",
            "cache_reduction",
            "vector_common_parallel",
            "vector_reduction",
        ),
        knobs=knobs,
        rules=("multi-level-tiling-cached",),
    )
    return [zero, tiled]


def full_text() -> str:
    task = make_task()
    sketches = "\n".join(ansor_ir.sketch_op(task, s) for s in make_sketches(task))
    return ansor_ir.module_text(
        [
            ansor_ir.task_op(task, task.func_text),
            ansor_ir.task_op(task, sketches),
        ]
    )


def iree_opt(text: str) -> subprocess.CompletedProcess:
    tool = find_tool("iree-opt")
    assert tool, "iree-opt not found"
    return subprocess.run(
        [tool, f"--irdl-file={ansor_ir.IRDL_PATH}", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_printed_ir_verifies_under_irdl():
    text = full_text()
    result = iree_opt(text)
    assert result.returncode == 0, result.stderr
    assert '"ansor.knob"' in result.stdout and '"ansor.compilation_info"' in result.stdout


def test_printing_is_deterministic():
    assert full_text() == full_text()
    text = full_text()
    assert "@ansor_sketch" not in text  # the sequence name is an attribute of the sketch
    assert 'sequence = "ansor_sketch_0123456789abcdef_s1"' in text
    assert '%d0 = "ansor.knob"() {dim = 0 : i64, extent = 64 : i64, kind = "S", levels = [' in text
    assert '%config = "ansor.compilation_info"(%d0, %d1, %d2) {levels = [' in text
    assert "%config = transform.param.constant #iree_codegen.compilation_info<" in text


def test_task_func_is_wrapped_in_a_module():
    task = make_task()
    op = ansor_ir.task_op(task, task.func_text)
    assert op.splitlines()[1].strip() == "module {"
    assert op.splitlines()[-2].strip() == "transform.yield"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("extent = 64 : i64, ", "", 'attribute "extent" is expected but not provided'),
        ('kind = "R"', 'kind = "X"', "does not satisfy the constraint"),
        ("extent = 64 : i64", 'extent = "64"', "expected base attribute 'builtin.integer'"),
        (
            '"ansor.knob"() {dim = 0 : i64, extent = 64 : i64, kind = "S", levels = [',
            '"ansor.knob"() {dim = 0 : i64, extent = 64 : i64, kind = "S", levels = "x", junk = [',
            "expected base attribute 'builtin.array'",
        ),
        (
            "transform.yield %root, %config",
            '%bad = "ansor.knob"() {dim = 0 : i64, extent = 8 : i64, kind = "S", levels = [], name = "b"}'
            " : () -> !transform.any_op\ntransform.yield %root, %config",
            "expected '!transform.any_param' but got '!transform.any_op'",
        ),
        (
            "^bb0(%root: !transform.any_op):",
            "^bb0(%root: !transform.any_op, %extra: !transform.any_op):",
            "expected region 0 to have 1 arguments but got 2",
        ),
    ],
)
def test_broken_ops_are_rejected(old, new, message):
    text = full_text()
    assert old in text
    result = iree_opt(text.replace(old, new, 1))
    assert result.returncode != 0
    assert message in result.stderr


def test_read_task_ops_round_trips_attributes():
    task = make_task()
    tasks = ansor_ir.read_task_ops(full_text())
    assert len(tasks) == 2
    with_func, with_sketches = tasks
    for read in tasks:
        assert read["key"] == task.key
        assert read["name"] == task.name
        assert read["weight"] == 3
        assert read["flops"] == 2 * 64**3
        assert read["root"] == "linalg.matmul"
        assert read["root_index"] == 0
        assert read["loop_extents"] == [64, 64, 64]
        assert read["iterator_types"] == ["parallel", "parallel", "reduction"]
        assert read["pipeline"] == "DoubleTilingExpert"
    assert with_func["func"] is not None and "linalg.matmul" in with_func["func"]
    assert with_func["sketches"] == []
    assert with_sketches["func"] is None

    zero, tiled = with_sketches["sketches"]
    assert zero["index"] == 0 and zero["knobs"] == [] and zero["levels"] is None
    assert zero["rules"] == ["iree-default"]
    assert zero["fixed_config"].startswith("#iree_codegen.compilation_info<")
    assert zero["sequence"] == f"ansor_sketch_{task.key}_s0"

    sketch = make_sketches(task)[1]
    assert tiled["index"] == 1 and tiled["task"] == task.key
    assert tiled["pipeline"] == sketch.pipeline
    assert tiled["rules"] == list(sketch.rules)
    assert tiled["levels"] == list(sketch.levels)
    assert tiled["fixed_config"] is None
    assert tiled["knobs"] == [
        {"name": k.name, "dim": k.dim, "extent": k.extent, "kind": k.kind, "levels": list(k.levels)}
        for k in sketch.knobs
    ]


def test_reading_bad_text_is_an_ansor_error():
    with pytest.raises(AnsorError):
        ansor_ir.read_task_ops('"ansor.task"() ({')


def test_bad_knob_names_are_refused():
    task = make_task()
    sketch = make_sketches(task)[1]
    bad = Sketch(**{**sketch.__dict__, "knobs": (TileKnob("config", 0, 64, ("distribution",)),)})
    with pytest.raises(ValueError):
        ansor_ir.sketch_op(task, bad)


def test_func_and_sketches_in_one_task():
    task = make_task()
    sketches = [ansor_ir.sketch_op(task, s) for s in make_sketches(task)]
    for body in (
        "\n".join([ansor_ir.func_module(task), *sketches]),
        "\n".join([task.func_text, *sketches]),  # a bare function: the whole body is wrapped
    ):
        text = ansor_ir.module_text([ansor_ir.task_op(task, body)])
        result = iree_opt(text)
        assert result.returncode == 0, result.stderr
        (read,) = ansor_ir.read_task_ops(text)
        assert "func.func @task" in read["func"]
        assert [s["index"] for s in read["sketches"]] == [0, 1]


def test_extracted_task_sketches_verify(small_task, target):
    from ansor_mlir.space.sketch_rules import generate_sketches

    sketches = generate_sketches(small_task, target)
    assert any(s.knobs for s in sketches) and any(not s.knobs for s in sketches)
    body = "\n".join(
        [ansor_ir.func_module(small_task)] + [ansor_ir.sketch_op(small_task, s) for s in sketches]
    )
    text = ansor_ir.module_text([ansor_ir.task_op(small_task, body)])
    result = iree_opt(text)
    assert result.returncode == 0, result.stderr
    (read,) = ansor_ir.read_task_ops(text)
    assert read["key"] == small_task.key
    assert [s["index"] for s in read["sketches"]] == [s.index for s in sketches]

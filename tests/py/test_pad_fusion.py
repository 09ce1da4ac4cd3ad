"""Pad fusion: window ops that reduce over their window only read their padding in their own dispatch, and
strategies pad each workgroup's input tile there."""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import AVX2_CPU, PINNED_CPUS, assert_builds_match_reference, pinned_target

from ansor_bench.workloads import make_workload
from ansor_mlir import api
from ansor_mlir.api import _with_best
from ansor_mlir.codegen.transform_strategy import pad_row_tile
from ansor_mlir.core.measure_result import ErrorKind
from ansor_mlir.core.schedule import REDUCTION, Candidate, Decompose, Family, PadRows, tile_knobs
from ansor_mlir.database.records import read_records
from ansor_mlir.frontend.dispatch_regions import as_one_dispatch
from ansor_mlir.frontend.pad_fusion import CONV1D_NAME, NAME, fuse_pads_into_1d_convolutions
from ansor_mlir.frontend.program_rewrites import DEFAULT_REWRITES, SEPARATOR, rewrite_program
from ansor_mlir.measure.compare import load_function
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.mlir.context import new_context, parse_module
from ansor_mlir.mlir.iree_compiler import FLOW_PAD_FLAG, compile_to_phase, compile_vmfb, run_tool
from ansor_mlir.space.annotation import is_valid, sample_candidate
from ansor_mlir.space.resolve import resolve
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.callbacks import TuningCallback
from ansor_mlir.tuning.tuner import build_input

WITH_PAD_FUSION = SEPARATOR.join((DEFAULT_REWRITES, NAME))
WITH_CONV1D_PAD_FUSION = SEPARATOR.join((DEFAULT_REWRITES, CONV1D_NAME))


class Notes(TuningCallback):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_note(self, message: str) -> None:
        self.seen.append(message)


def assert_tuned_program_matches(workload, text: str, target, tmp_path) -> None:
    """Build the tuned program `text` (compile_vmfb adds the flag a fused pad needs), run it once and check it
    against the workload's numpy reference."""
    built = compile_vmfb(text, target.compile_flags(), tmp_path / "tuned.vmfb")
    assert built.ok, built.stderr[-2000:]
    fn, _ = load_function(tmp_path / "tuned.vmfb", workload.func_name)
    inputs = workload.inputs(0)
    (expected,) = workload.reference(inputs)
    np.testing.assert_allclose(np.asarray(fn(*inputs).to_host()), expected, rtol=1e-4, atol=1e-4)


MAX_POOL = """
func.func @pool(%x: tensor<1x9x9x16xf32>) -> tensor<1x9x9x16xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %p = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %ninf : f32
  } : tensor<1x9x9x16xf32> to tensor<1x11x11x16xf32>
  %w = tensor.empty() : tensor<3x3xf32>
  %e = tensor.empty() : tensor<1x9x9x16xf32>
  %f = linalg.fill ins(%ninf : f32) outs(%e : tensor<1x9x9x16xf32>) -> tensor<1x9x9x16xf32>
  %y = linalg.pooling_nhwc_max {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
    ins(%p, %w : tensor<1x11x11x16xf32>, tensor<3x3xf32>) outs(%f : tensor<1x9x9x16xf32>) -> tensor<1x9x9x16xf32>
  return %y : tensor<1x9x9x16xf32>
}
"""


def fused(text: str) -> str:
    return rewrite_program(text, WITH_PAD_FUSION.split(SEPARATOR), "test").text


def test_window_only_reductions_get_their_pad_and_others_keep_theirs():
    depthwise = fused(make_workload("DEP", [1, 12, 12, 32, 3, 1, 1]).mlir)
    assert depthwise.count("flow.dispatch.region") == 1 and "tensor.pad" in depthwise.split("flow.dispatch.region")[1]
    assert fused(MAX_POOL).count("flow.dispatch.region") == 1
    # A convolution reduces over its input channels too: IREE's fused form of it is slower, so it stays.
    conv = make_workload("C2D", [1, 12, 12, 16, 32, 3, 1, 1]).mlir
    assert "flow.dispatch.region" not in fused(conv)
    assert rewrite_program(conv, WITH_PAD_FUSION.split(SEPARATOR), "test").text == conv


def test_conv1d_pad_fusion_takes_1d_convolutions_over_input_channels_too():
    conv = make_workload("C1D", [1, 32, 16, 32, 3, 2, 1]).mlir
    changed = rewrite_program(conv, WITH_CONV1D_PAD_FUSION.split(SEPARATOR), "test")
    assert changed.summary() == f"{CONV1D_NAME} (1 op)"
    assert "tensor.pad" in changed.text.split("flow.dispatch.region")[1]
    # A 2-D window over input channels keeps its pad dispatch (its fused search lost), a matmul reads no window.
    for other in (make_workload("C2D", [1, 12, 12, 16, 32, 3, 1, 1]).mlir, make_workload("GMM", [1, 8, 8, 8]).mlir):
        assert rewrite_program(other, WITH_CONV1D_PAD_FUSION.split(SEPARATOR), "test").text == other
    # A grouped 2-D one keeps its pad before the channel split: nothing takes the pad, so nothing moves it.
    grouped = parse_module(make_workload("GRP", [1, 14, 14, 16, 32, 3, 2, 1, 1, 4]).mlir, "test", new_context())
    before = str(grouped)
    assert fuse_pads_into_1d_convolutions(grouped) == 0 and str(grouped) == before


# A grouped 1-D convolution as an importer writes it: pad, then the channels split into 2 groups of 4.
GROUPED_CONV1D = """func.func @gconv(%x: tensor<1x16x8xf32>, %w: tensor<2x4x3x4xf32>) -> tensor<1x16x2x4xf32> {
  %z = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 1, 0] high[0, 1, 0] {
  ^bb0(%a: index, %b: index, %c: index):
    tensor.yield %z : f32
  } : tensor<1x16x8xf32> to tensor<1x18x8xf32>
  %g = tensor.expand_shape %p [[0], [1], [2, 3]] output_shape [1, 18, 2, 4]
    : tensor<1x18x8xf32> into tensor<1x18x2x4xf32>
  %e = tensor.empty() : tensor<1x16x2x4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x16x2x4xf32>) -> tensor<1x16x2x4xf32>
  %y = linalg.generic {indexing_maps = [
      affine_map<(n, ow, g, o, kw, c) -> (n, ow + kw, g, c)>,
      affine_map<(n, ow, g, o, kw, c) -> (g, o, kw, c)>,
      affine_map<(n, ow, g, o, kw, c) -> (n, ow, g, o)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%g, %w : tensor<1x18x2x4xf32>, tensor<2x4x3x4xf32>) outs(%f : tensor<1x16x2x4xf32>) {
  ^bb0(%i: f32, %k: f32, %acc: f32):
    %m = arith.mulf %i, %k : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x16x2x4xf32>
  return %y : tensor<1x16x2x4xf32>
}
"""


def test_a_grouped_convolution_splits_its_channels_before_the_pad_and_takes_it_into_its_dispatch(tmp_path):
    """pad -> expand_shape (channels into groups) -> conv becomes expand_shape -> pad -> conv: the pad pads no
    split dimension, so it feeds the convolution in one dispatch; IREE's builds of both forms agree."""
    changed = rewrite_program(GROUPED_CONV1D, WITH_CONV1D_PAD_FUSION.split(SEPARATOR), "test")
    assert changed.summary() == f"{CONV1D_NAME} (1 op)"
    before, region = changed.text.split("flow.dispatch.region")
    assert "tensor.pad" in region and "tensor.expand_shape" in before and "tensor.pad" not in before
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((1, 16, 8), dtype=np.float32), rng.standard_normal((2, 4, 3, 4), dtype=np.float32)]
    outputs = []
    for label, text in (("given", GROUPED_CONV1D), ("rewritten", changed.text)):
        built = compile_vmfb(text, api.resolve_target("llvm-cpu").compile_flags(), tmp_path / f"{label}.vmfb")
        assert built.ok, built.stderr[-2000:]
        fn, _ = load_function(tmp_path / f"{label}.vmfb", "gconv")
        outputs.append(np.asarray(fn(*inputs).to_host()))
    np.testing.assert_allclose(outputs[1], outputs[0], rtol=1e-5, atol=1e-5)


def test_a_tuned_convolution_with_its_pad_fused_builds_runs_and_matches_numpy(tmp_path):
    """Input channels and the window reduced in one dispatch that pads each workgroup's tile itself."""
    workload = make_workload("C1D", [1, 32, 16, 32, 3, 2, 1])
    target = api.resolve_target("llvm-cpu")
    api.tune(workload.mlir, target, trials_per_task=3, log=tmp_path / "log.jsonl", progress=False,
             rewrites=WITH_CONV1D_PAD_FUSION)
    fused = _with_best(api.rewritten("test", workload.mlir, workload.func_name, WITH_CONV1D_PAD_FUSION).text,
                       workload.func_name, tmp_path / "log.jsonl", target)
    assert "tensor.pad" in fused and "flow.executable" in fused
    assert_tuned_program_matches(workload, fused, target, tmp_path)


def test_a_fused_task_whose_untuned_build_fails_is_tuned_against_iree_default_with_the_pad_split_off(tmp_path):
    """IREE's default of a 31-tap, 512-channel 1-D conv with its pad fused exceeds the 32 KB stack limit: the
    reference (outputs, time to beat) is the task built as IREE forms it, the fused default is logged as the
    failure it is, and the tuned program is still built, run and right."""
    workload = make_workload("C1D", [1, 64, 512, 32, 31, 1, 15])
    target = api.resolve_target("llvm-cpu")
    notes = Notes()
    log = tmp_path / "log.jsonl"
    result = api.tune(workload.mlir, target, trials_per_task=3, log=log, progress=False,
                      rewrites=WITH_CONV1D_PAD_FUSION, callbacks=[notes])
    assert any("the reference is IREE's default with the pad split off" in n for n in notes.seen), notes.seen
    defaults = [r for r in read_records(log) if r.candidate.sketch_index == 0 and not r.candidate.values]
    assert defaults and all(r.result.error is ErrorKind.COMPILE_ERROR for r in defaults), defaults
    assert result.tasks and all(t.best_s is not None for t in result.tasks)
    assert_tuned_program_matches(workload, result.module, target, tmp_path)


def test_a_task_holding_a_pad_is_built_as_one_dispatch():
    task = """func.func @task(%x: tensor<1x4x4x8xf32>, %w: tensor<3x3x8xf32>) -> tensor<1x4x4x8xf32> {
  %z = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %z : f32
  } : tensor<1x4x4x8xf32> to tensor<1x6x6x8xf32>
  %e = tensor.empty() : tensor<1x4x4x8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %y = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
    ins(%p, %w : tensor<1x6x6x8xf32>, tensor<3x3x8xf32>) outs(%f : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %y : tensor<1x4x4x8xf32>
}"""
    wrapped = as_one_dispatch(task, "task")
    assert wrapped.count("flow.dispatch.region") == 1 and wrapped.index("flow.dispatch.region") < wrapped.index("pad")
    flags = api.resolve_target("llvm-cpu").compile_flags()
    flow = run_tool("iree-compile", [*flags, "--compile-to=flow", "-"], stdin=wrapped.encode())
    assert flow.ok and flow.stdout.decode().count("flow.executable private") == 1
    # Without a pad IREE forms one dispatch anyway: the text, and so the task's key, stays as it was.
    gemm = make_workload("GMM", [1, 8, 8, 8]).mlir
    assert as_one_dispatch(gemm, "gemm") == gemm


def test_a_tuned_depthwise_program_with_fused_pads_builds_runs_and_matches_numpy(tmp_path):
    workload = make_workload("DEP", [1, 14, 14, 32, 3, 1, 1])
    target = api.resolve_target("llvm-cpu")
    notes = Notes()
    result = api.tune(workload.mlir, target, trials_per_task=2, log=tmp_path / "log.jsonl", progress=False,
                      rewrites=WITH_PAD_FUSION, callbacks=[notes])
    assert any("pad-fusion (1 op)" in n and FLOW_PAD_FLAG in n for n in notes.seen), notes.seen
    assert [r.task.ops for r in result.tasks] == [("linalg.depthwise_conv_2d_nhwc_hwc",)]  # no pad dispatch
    # Whether the fused program is the one returned is timed (`tuning.rewrite_check`): with 2 trials on a busy
    # host the program as given can win. The fused program with the log's best is built either way.
    assert ("tensor.pad" in result.module) == result.rewrite_check.kept
    fused = _with_best(api.rewritten("test", workload.mlir, workload.func_name, WITH_PAD_FUSION).text,
                       workload.func_name, tmp_path / "log.jsonl", target)
    assert "tensor.pad" in fused and "flow.executable" in fused
    # A flow-level module with a fused pad builds only with native pad handling; compile_vmfb adds it.
    plain = run_tool("iree-compile", [*target.compile_flags(), "-", "-o", str(tmp_path / "plain.vmfb")],
                     stdin=fused.encode())
    assert not plain.ok and FLOW_PAD_FLAG not in target.compile_flags()
    assert_tuned_program_matches(workload, fused, target, tmp_path)


def padded_depthwise_task(shape: tuple[int, ...], target):
    from ansor_mlir.core.task import main_task
    from ansor_mlir.frontend.task_extraction import extract_tasks

    workload = make_workload("DEP", shape)
    task = main_task(extract_tasks(fused(workload.mlir), target, "DEP"))
    assert task.pads_input
    return workload, task


@pytest.fixture(params=PINNED_CPUS)
def pinned(request):
    return pinned_target(request.param)


def test_every_transform_sketch_of_a_padded_depthwise_task_builds_for_pinned_cpus(pinned):
    """Compile-only: the strategies pad each workgroup's input tile (no megabyte stack buffer), and the
    depthwise convolution gets the decomposition sketch (1-D convolutions over several output pixels)."""
    workload, task = padded_depthwise_task((1, 14, 14, 32, 3, 1, 1), pinned)
    sketches = [s for s in generate_sketches(task, pinned) if s.family is Family.TRANSFORM]
    assert any(s.has(Decompose) for s in sketches)
    flow = compile_to_phase(fused(workload.mlir), pinned.compile_flags(), "flow", "DEP")
    rng = random.Random(0)
    items = [build_input(task, s, sample_candidate(s, task, pinned, rng), flow) for s in sketches]
    assert all("iree-codegen-fuse-tensor-pad-with-consumer" in item.strategy[1] for item in items)
    for build in LocalBuilder(pinned, workers=1, timeout_s=120).build(items):
        assert build.ok, f"{build.error.value} {build.message}"


@pytest.mark.parametrize(("tile", "elements", "row"), [
    ((6, 6, 32), 256, 0),  # a 6x32 row: 12 zmm, whole
    ((4, 30, 16), 256, 15),  # 30 zmm a row: halves
    ((6, 30, 32), 256, 6),  # 60 zmm a row: the largest divisor of 30 within 8 columns
    ((6, 6, 32), 64, 2),  # AVX2's budget: 8 ymm
    ((3, 3, 144), 256, 1),  # one column is over the budget: rows of the innermost dimension
    ((6, 6, 32), 0, 1),  # a trace recorded before `PadRows`: as it was built
    ((38,), 256, 1),
])
def test_a_padded_tile_is_copied_in_rows_within_half_the_vector_registers(tile, elements, row):
    assert pad_row_tile(tile, elements) == row


def test_every_transform_sketch_of_a_padded_task_copies_rows_within_the_targets_registers(pinned):
    """Compile-free, AVX2 and AVX-512: the row budget is the target's (8 ymm or 16 zmm of f32), whatever rule
    derived the sketch; IREE's own configuration has no strategy to carry it."""
    _, task = padded_depthwise_task((1, 14, 14, 32, 3, 1, 1), pinned)
    expected = PadRows(elements=64 if pinned.resolved_cpu == AVX2_CPU else 256)
    sketches = generate_sketches(task, pinned)
    assert {s.step(PadRows) for s in sketches if s.family is Family.TRANSFORM} == {expected}
    assert not any(s.has(PadRows) for s in sketches if s.family is not Family.TRANSFORM)


def test_the_strategy_tiles_the_pad_into_the_rows_its_sketch_names(pinned):
    """Compile-free, AVX2 and AVX-512: the rendered strategy tiles the dispatch's pad by the row tile of its
    workgroup's padded input tile and the sketch's budget, and a sketch without `PadRows` (a record written before
    it) by rows of the innermost dimension, as it was built then."""
    import re
    from dataclasses import replace

    from ansor_mlir.codegen.transform_strategy import render_strategy

    def pad_tiles(sketch, candidate) -> list[str]:
        text = render_strategy(sketch, candidate, task, "s")
        pads = re.findall(r'(%\w+) = transform.structured.match ops\{\["tensor.pad"\]\}', text)
        return [m for p in pads for m in re.findall(rf"tile_using_for {p} tile_sizes \[([\d, ]+)\]", text)]

    _, task = padded_depthwise_task((1, 14, 14, 32, 3, 1, 1), pinned)
    rng = random.Random(0)
    for sketch in (s for s in generate_sketches(task, pinned) if s.family is Family.TRANSFORM):
        candidate = sample_candidate(sketch, task, pinned, rng)
        tile = resolve(sketch, candidate, task).padded_input_tile
        row = pad_row_tile(tile, sketch.step(PadRows).elements)
        assert pad_tiles(sketch, candidate) == [f"1, {row}, 0"], (sketch.rules, tile)
        before = replace(sketch, steps=tuple(s for s in sketch.steps if not isinstance(s, PadRows)))
        assert pad_tiles(before, candidate) == ["1, 1, 0"], sketch.rules


def _vector_shapes_after_strategy(pinned, text: str, flags: list[str]) -> set[tuple[int, ...]]:
    """The vector shapes of a program's dispatches right after their transform strategy ran."""
    import re

    done = run_tool("iree-compile", [*pinned.compile_flags(), *flags, "--compile-to=executable-targets",
                                     "--mlir-print-ir-after=iree-codegen-lower-executable-using-transform-dialect",
                                     "-", "-o", "/dev/null"], stdin=text.encode())
    assert done.ok, done.stderr[-2000:]
    assert "vector.transfer_read" in done.stderr
    return {tuple(int(d) for d in m.rstrip("x").split("x")) for m in re.findall(r"vector<((?:\d+x)+)", done.stderr)}


def test_a_workgroup_pads_its_input_tile_row_by_row(pinned, tmp_path):
    """Compile-only, AVX2 and AVX-512: after the strategy no vector spans more than one row of the padded input
    tile (a `WxC` plane within `PadRows`' budget at most). Vectorized whole, the tile was one
    `vector<6x10x32xf32>`-like value, spilled and copied again (half of DEP's fused kernels' time on Zen 3). The
    rewritten program built with a tuning spec gets the same vectors as the flow-level module the candidate was
    measured as: there IREE kept the pad's unit batch dimension, each row spanned a whole `WxC` plane, and the
    strategy ran 4x slower (DEP(1,42,42,144), Zen 3)."""
    from ansor_mlir.codegen.tuning_spec import attach_configs, render_spec
    from ansor_mlir.mlir.iree_compiler import tuning_spec_flags

    workload, task = padded_depthwise_task((1, 14, 14, 32, 3, 1, 1), pinned)
    program = fused(workload.mlir)
    flow = compile_to_phase(program, pinned.compile_flags(), "flow", "DEP")
    rng = random.Random(0)
    for sketch in (s for s in generate_sketches(task, pinned) if s.family is Family.TRANSFORM):
        item = build_input(task, sketch, sample_candidate(sketch, task, pinned, rng), flow)
        text, _ = attach_configs(flow, {}, task.name, {task.key: item.strategy})
        shapes = _vector_shapes_after_strategy(pinned, text, [FLOW_PAD_FLAG])
        assert all(sum(d > 1 for d in shape) <= 2 for shape in shapes), (sketch.rules, sorted(shapes))
        spec = tmp_path / "spec.mlir"
        spec.write_text(render_spec([], [(task, *item.strategy)]))
        through_spec = _vector_shapes_after_strategy(pinned, program, tuning_spec_flags(spec))
        assert through_spec == shapes, (sketch.rules, sorted(through_spec ^ shapes))


def test_padded_depthwise_candidates_run_and_match_numpy(target):
    workload, task = padded_depthwise_task((1, 14, 14, 32, 3, 1, 1), target)
    flow = compile_to_phase(fused(workload.mlir), target.compile_flags(), "flow", "DEP")
    rng = random.Random(1)
    items = [build_input(task, s, sample_candidate(s, task, target, rng), flow)
             for s in generate_sketches(task, target) if s.family is Family.TRANSFORM]
    assert_builds_match_reference(target, items, workload)


def test_a_padded_workgroup_tile_over_the_stack_limit_is_rejected(target):
    """IREE rejects a function whose stack buffers pass its limit: the padded input tile counts."""
    _, task = padded_depthwise_task((1, 28, 28, 32, 3, 1, 1), target)
    sketch = next(s for s in generate_sketches(task, target) if s.has(Decompose))
    candidate = sample_candidate(sketch, task, target, random.Random(0))
    assert resolve(sketch, candidate, task).padded_input_bytes <= target.stack_limit_bytes
    values = dict(candidate.values)
    for knob in tile_knobs(sketch.knobs):
        if knob.levels[0] == "distribution" and knob.kind != REDUCTION:
            values[knob.name] = (knob.extent, *values[knob.name][1:])  # one workgroup: a 30x30x32 padded input
    whole = Candidate(task.key, sketch.index, tuple(sorted(values.items())))
    assert resolve(sketch, whole, task).padded_input_bytes == 30 * 30 * 32 * 4 > target.stack_limit_bytes
    assert not is_valid(sketch, values, task, target)

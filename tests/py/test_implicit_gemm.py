"""Implicit-GEMM sketches: convolutions that fit a GEMM poorly, rewritten into im2col + contraction before tiling.

The contraction's loops are derived from indexing maps alone and checked
against IREE's own rewrite; the rule is checked on loop structure (strided,
grouped, depthwise, stride-1 convolutions, a matmul); candidates compile for
pinned AVX2 and AVX-512 CPUs, and build, run and match numpy on the host, the
grouped one as a micro-kernel (FMAs in the hot loop, no spills).
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_builds_match_reference

from ansor_bench.workloads import make_workload
from ansor_mlir.codegen.tuning_spec import attach_configs
from ansor_mlir.core.schedule import Candidate, ImplicitGemm, MicroKernel, Pack, Sketch, TileAndFuse
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import LinalgOpInfo, Task, main_task
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.frontend.task_extraction import extract_tasks, generalized_ops
from ansor_mlir.measure.compare import run_once
from ansor_mlir.measure.kernel_asm import dump_assembly, hot_loop
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.mlir.iree_compiler import compile_to_phase, run_tool
from ansor_mlir.space.annotation import is_valid_strategy, sample_candidate
from ansor_mlir.space.implicit_gemm import implicit_gemm_root
from ansor_mlir.space.resolve import resolve
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.tuner import build_input

# Grouped (2 groups) and strided 3x3: the gemm is (n, oh, ow, g, f, K) = (1, 14, 14, 2, 32, 36); 14x32 (AVX-512)
# 2x32 (AVX2) micro-kernels over ow x f (14x8 is beyond AVX2's accumulator budget).
GRP = ("GRP", (1, 28, 28, 8, 64, 3, 2, 1, 1, 2))
C2D_STRIDED = ("C2D", (1, 30, 30, 16, 32, 3, 2, 1))
C1D_STRIDED = ("C1D", (1, 64, 16, 32, 3, 2, 1))
DIL = ("DIL", (1, 20, 20, 8, 16, 3, 1, 2, 2))


def task_of(workload: tuple[str, tuple[int, ...]], target: Target) -> Task:
    name, shape = workload
    return main_task(extract_tasks(make_workload(name, shape).mlir, target, name))


def implicit_gemm_sketch(task: Task, target: Target) -> Sketch | None:
    return next((s for s in generate_sketches(task, target) if s.has(ImplicitGemm)), None)


def first_candidate(sketch: Sketch, task: Task, target: Target, wanted=lambda values: True,
                    seeds: int = 10) -> Candidate:
    """The first seed's sample that passes annotation (a tight micro-kernel, 14x32 on AVX-512, leaves few) and
    has the `wanted` values (sampled, not set: the tiles around a micro-kernel must hold it)."""
    found = (sample_candidate(sketch, task, target, random.Random(seed)) for seed in range(seeds))
    candidate = next((c for c in found if c is not None and wanted(dict(c.values))), None)
    assert candidate is not None
    return candidate


@pytest.fixture(scope="module", params=["znver3", "znver4"])
def pinned(request) -> Target:
    return resolve_target(Target(cpu=request.param))


def assert_derivation_is_irees(task: Task) -> None:
    """The contraction derived from the task's root is the one IREE's `convolution-to-igemm` makes of it."""
    root = task.root
    conv = LinalgOpInfo(root.name, root.loop_extents, root.iterator_types, root.indexing_maps, 2, (-1, -1, 0),
                        root.body_ops)
    derived = implicit_gemm_root(conv)
    assert derived is not None
    rewritten = run_tool("iree-opt", ["--pass-pipeline=builtin.module(func.func(iree-codegen-convolution-to-igemm))",
                                      "-"], stdin=task.func_text.encode())
    assert rewritten.ok, rewritten.stderr.decode()
    gemm = [op for op in generalized_ops(rewritten.stdout.decode()) if op and "reduction" in op["iterators"]][-1]
    assert (derived.extents, derived.iterator_types, derived.indexing_maps) == (
        gemm["extents"], gemm["iterators"], gemm["maps"])


@pytest.mark.parametrize("workload", [GRP, C2D_STRIDED, C1D_STRIDED, DIL], ids=lambda w: w[0])
def test_derived_contraction_is_irees_rewrite(workload, target):
    """The loops, iterators and maps derived from the convolution's indexing maps are those of the contraction
    IREE's `convolution-to-igemm` makes of it."""
    assert_derivation_is_irees(task_of(workload, target))


def test_rule_reads_loop_structure(target):
    """Strided and grouped convolutions get the sketch; stride-1 ones, dilated or not (their own micro-kernel:
    output pixels are a row loop as they are), a depthwise one (no output-channel loop: no GEMM) and a matmul
    do not."""
    grp = implicit_gemm_sketch(task_of(GRP, target), target)
    assert grp is not None and grp.steps[0] == ImplicitGemm()
    assert grp.has(Pack) and grp.has(MicroKernel)  # the grouped filter [g, f, kh, kw, c] is packed along f
    assert grp.rules[-3:] == ("implicit-gemm", "packing", "micro-kernel")
    strided = implicit_gemm_sketch(task_of(C2D_STRIDED, target), target)
    assert strided is not None and not strided.has(Pack)  # an HWCF filter is read along the output channels
    stride_1 = ("C2D", (1, 14, 14, 16, 32, 3, 1, 1))
    plain_ones = [DIL, stride_1, ("DEP", (1, 16, 16, 32, 3, 2, 1)), ("GMM", (1, 32, 32, 32))]
    for plain in plain_ones:
        assert implicit_gemm_sketch(task_of(plain, target), target) is None, plain[0]
    # 3 input channels a tap (a first layer): the im2col gather would be scalar, the direct convolution's
    # micro-kernel tiles it (`test_window_micro_kernel.py`).
    assert implicit_gemm_sketch(task_of(("C2D", (1, 32, 32, 3, 32, 7, 2, 3)), target), target) is None


def test_candidates_compile_for_pinned_cpus(pinned):
    """Compile-only: sampled grouped and strided candidates build for an AVX2 and an AVX-512 CPU."""
    builds = []
    for workload in (GRP, C2D_STRIDED):
        task = task_of(workload, pinned)
        sketch = implicit_gemm_sketch(task, pinned)
        candidate = first_candidate(sketch, task, pinned)
        assert resolve(sketch, candidate, task).im2col_panel_bytes <= pinned.stack_limit_bytes
        flow = compile_to_phase(make_workload(*workload).mlir, pinned.compile_flags(), "flow", workload[0])
        builds.append(build_input(task, sketch, candidate, flow))
    for build in LocalBuilder(pinned, workers=1, timeout_s=120).build(builds):
        assert build.ok, f"{build.error.value} {build.message}"


@pytest.mark.parametrize("workload", [GRP, C2D_STRIDED, C1D_STRIDED], ids=lambda w: w[0])
def test_candidates_build_run_and_match_numpy(workload, target):
    name, shape = workload
    task = task_of(workload, target)
    sketch = implicit_gemm_sketch(task, target)
    rng = random.Random(1)
    candidates = [c for c in (sample_candidate(sketch, task, target, rng) for _ in range(2)) if c is not None]
    assert candidates
    work = make_workload(name, shape)
    flow = compile_to_phase(work.mlir, target.compile_flags(), "flow", name)
    assert_builds_match_reference(target, [build_input(task, sketch, c, flow) for c in candidates], work)


def test_grouped_strided_micro_kernel_keeps_accumulators_in_registers(pinned):
    """Compile-only, AVX2 and AVX-512: the largest micro-kernel of the grouped strided conv, one workgroup per
    group: FMAs with broadcast pixels in the hot loop, no spill stores or reloads."""
    task = task_of(GRP, pinned)
    sketch = implicit_gemm_sketch(task, pinned)
    (knob,) = sketch.step(MicroKernel).knobs
    # The largest shape, its reduction loop not unrolled: 2x32 on AVX2 unrolled twice holds 8 B vectors beside
    # 8 accumulators and reloads one (a candidate the search may measure, not the register tile this checks).
    candidate = first_candidate(sketch, task, pinned, seeds=200,
                                wanted=lambda v: v["micro_kernel"] == (0,) and v["d5"][-1] == 1)
    work = make_workload(*GRP)
    flow = compile_to_phase(work.mlir, pinned.compile_flags(), "flow", GRP[0])
    item = build_input(task, sketch, candidate, flow)
    text, _ = attach_configs(flow, {}, GRP[0], {task.key: item.strategy})
    with tempfile.TemporaryDirectory() as tmp:
        reports = [hot_loop(path.read_text()) for path in dump_assembly(text, Path(tmp))]
    loop = max((r for r in reports if r is not None), key=lambda r: r.fmas)
    assert loop.is_micro_kernel, (knob.options[0], loop)


# 16 input channels per group: one kernel tap's channels are a whole vector (or two) of the input.
GRP_WIDE = ("GRP", (1, 28, 28, 32, 64, 3, 2, 1, 1, 2))


def test_k_tiles_stay_within_one_taps_channels_and_their_loop_unrolls(target):
    """An implicit GEMM's K tiles divide a tap's input channels, so each im2col copy is a contiguous run; their
    loop (9 taps here) is unrolled so IREE sees constant, aligned K offsets and copies with vector loads."""
    task = task_of(GRP_WIDE, target)
    sketch = implicit_gemm_sketch(task, target)
    (k_knob,) = [k for k in sketch.step(TileAndFuse).knobs if k.dim == 5]
    assert (k_knob.extent, k_knob.outer_divides) == (144, 16)
    rng = random.Random(0)
    sampled = [c for c in (sample_candidate(sketch, task, target, rng) for _ in range(20)) if c is not None]
    assert sampled and all(16 % dict(c.values)["d5"][0] == 0 for c in sampled)
    values = dict(sampled[0].values)
    values["d5"] = (16, values["d5"][-1] if 16 % values["d5"][-1] == 0 else 1)
    candidate = Candidate(task.key, sketch.index, tuple(sorted(values.items())))
    work = make_workload(*GRP_WIDE)
    flow = compile_to_phase(work.mlir, target.compile_flags(), "flow", GRP_WIDE[0])
    item = build_input(task, sketch, candidate, flow)
    _, script = item.strategy
    assert "transform.loop.unroll" in script and "factor = 9" in script
    (build,) = LocalBuilder(target, workers=1, timeout_s=120).build([item])
    assert build.ok, f"{build.error.value} {build.message}"
    inputs = work.inputs()
    (expected,) = work.reference(inputs)
    (got,) = run_once(build.program.vmfb, work.func_name, inputs)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


# The suite's grouped conv: (n, oh, ow, g, f, K) = (1, 28, 28, 4, 32, 144), K in 9 tiles of one tap's 16 channels.
GRP_SUITE = ("GRP", (1, 56, 56, 64, 128, 3, 2, 1, 1, 4))


def test_row_tiles_cut_after_packing_in_an_unrolled_k_loop_count_a_panel_per_k_tile(pinned):
    """Compile-only, AVX2 and AVX-512: row tiles cut after packing inside the unrolled K loop gather one im2col
    panel per K tile; annotation counts the stack IREE reports for them, and rejects the candidate before
    compiling (9 panels of 2x28x16 floats: 34304 bytes against IREE's 32 KiB)."""
    task = task_of(GRP_SUITE, pinned)
    sketch = implicit_gemm_sketch(task, pinned)
    values = {"d1": (4, 2), "d2": (28, 28), "d3": (1, 1), "d4": (32,), "d5": (16, 4), "micro_kernel": (0,)}
    candidate = Candidate(task.key, sketch.index, tuple(sorted(values.items())))
    resolved = resolve(sketch, candidate, task)
    assert resolved.im2col_buffers == 9
    stack = resolved.packed_panel_bytes + resolved.im2col_panel_bytes * resolved.im2col_buffers
    assert stack > pinned.stack_limit_bytes and not is_valid_strategy(resolved, pinned)
    # The same tiles with the rows cut with the workgroup's (before the K loop): one panel, and IREE builds it.
    values["d1"] = (4, 4)
    whole = Candidate(task.key, sketch.index, tuple(sorted(values.items())))
    whole_resolved = resolve(sketch, whole, task)
    assert whole_resolved.im2col_buffers == 1 and is_valid_strategy(whole_resolved, pinned)
    flow = compile_to_phase(make_workload(*GRP_SUITE).mlir, pinned.compile_flags(), "flow", GRP_SUITE[0])
    split, kept = LocalBuilder(pinned, workers=1, timeout_s=120).build(
        [build_input(task, sketch, c, flow) for c in (candidate, whole)])
    assert not split.ok and f"Got {stack} bytes" in split.message, split.message
    assert kept.ok, f"{kept.error.value} {kept.message}"


# A channels-first strided convolution (NCHW x FCHW, as a model runs with `rewrites=none`): IREE's rewrite makes
# the filter the GEMM's left operand and the panel `[n, K, oh, ow]`. Derived as for NHWC, the packing sketch
# asked for a pack of the filter operand, and every such candidate failed to build (`expected linalg.pack vs
# tensor.extract_slice`: 209 compile errors in the dataset's network logs).
NCHW_STRIDED = """
func.func @nchw(%x: tensor<1x16x18x18xf32>, %w: tensor<32x16x3x3xf32>) -> tensor<1x32x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x32x8x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
    ins(%x, %w : tensor<1x16x18x18xf32>, tensor<32x16x3x3xf32>) outs(%init : tensor<1x32x8x8xf32>)
    -> tensor<1x32x8x8xf32>
  return %y : tensor<1x32x8x8xf32>
}
"""


def nchw_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))[:, :, ::2, ::2]
    return np.einsum("nchwij,fcij->nfhw", windows, w).astype(np.float32)


def test_channels_first_contraction_is_irees_and_its_candidates_build_and_match(target):
    task = main_task(extract_tasks(NCHW_STRIDED, target, "nchw"))
    assert_derivation_is_irees(task)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((1, 16, 18, 18), dtype=np.float32),
              rng.standard_normal((32, 16, 3, 3), dtype=np.float32)]
    expected = nchw_reference(*inputs)
    flow = compile_to_phase(NCHW_STRIDED, target.compile_flags(), "flow", "nchw")
    sketches = [s for s in generate_sketches(task, target) if s.has(ImplicitGemm)]
    assert sketches
    items = [build_input(task, s, first_candidate(s, task, target), flow) for s in sketches]
    for build in LocalBuilder(target, workers=1, timeout_s=120).build(items):
        assert build.ok, f"{build.error.value} {build.message}"
        (got,) = run_once(build.program.vmfb, "nchw", inputs)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)

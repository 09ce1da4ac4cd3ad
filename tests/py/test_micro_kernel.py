"""Register-blocked micro-kernel sketches: `mr x nr` register tiles that fill the vector register file.

Shapes and sampling are checked on pinned CPUs (an AVX2 and an AVX-512 one,
compile-free); the programs are built and run on the host, checked against
numpy, and their hot loop read from the assembly: FMAs, no spills.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import matmul_bias_relu

from ansor_bench.workloads import make_workload
from ansor_mlir.codegen.tuning_spec import attach_configs
from ansor_mlir.core.schedule import Candidate, Family, MicroKernel, Sketch, micro_kernel_shape
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import main_task
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.compare import run_once
from ansor_mlir.measure.kernel_asm import dump_assembly, hot_loop
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.space.annotation import is_valid, knob_bounds, sample_candidate, sample_value
from ansor_mlir.space.micro_kernel import MAX_K_UNROLL, MIN_CACHE_K, peeled_rows, register_shapes
from ansor_mlir.space.resolve import resolve
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.tuner import build_input

M, N, K = 64, 64, 96


def matmul(m: int, n: int, k: int) -> str:
    """`a @ b` alone: nothing after the root, the fill tiled (and peeled) on its own."""
    return f"""
func.func @mm(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}x{n}xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) outs(%f : tensor<{m}x{n}xf32>)
      -> tensor<{m}x{n}xf32>
  return %mm : tensor<{m}x{n}xf32>
}}
"""


def micro_kernel_sketch(task, target, family: Family = Family.TRANSFORM) -> Sketch | None:
    return next((s for s in generate_sketches(task, target) if s.has(MicroKernel) and s.family is family), None)


@pytest.fixture(scope="module", params=["znver3", "znver4"])
def pinned(request) -> Target:
    return resolve_target(Target(cpu=request.param))


def test_register_shapes_fill_the_register_file_without_spilling(pinned):
    lanes = pinned.vector_lanes(4)
    shapes = register_shapes(512, 512, pinned, 4)
    assert shapes == (("8x8", "4x16", "2x32") if pinned.vector_registers == 16 else ("16x16", "8x32", "4x64"))
    for mr, nr in map(micro_kernel_shape, register_shapes(96, 96, pinned, 4)):
        accumulators, b_vectors = mr * nr // lanes, nr // lanes
        assert 2 * accumulators >= pinned.vector_registers
        assert accumulators + b_vectors + 1 <= pinned.vector_registers
    if pinned.vector_registers == 16:
        assert "6x16" in register_shapes(96, 96, pinned, 4)  # what BLAS uses on AVX2
    # No row of 3 vectors: LLVM widens it to 4 and shuffles (4x24 ran 3-5x slower than 6x16 on Zen 3).
    assert all(nr // lanes in (1, 2, 4) for _, nr in map(micro_kernel_shape, register_shapes(96, 96, pinned, 4)))
    # With a peeled last row tile, the largest shapes with a register to spare, whatever the row count.
    peeled = set(register_shapes(512, 512, pinned, 4, peel=True)) - set(shapes)
    assert peeled == ({"6x16"} if pinned.vector_registers == 16 else {"14x32", "6x64"})


def test_rules_read_loop_structure(target):
    def kernels(mlir: str, name: str) -> list[Family]:
        task = main_task(extract_tasks(mlir, target, name))
        return [s.family for s in generate_sketches(task, target) if s.has(MicroKernel)]

    assert kernels(matmul_bias_relu(M, N, K), "mm") == [Family.TRANSFORM, Family.PIPELINE]
    # B read across the vector loop: packed into panels first (`test_transform_packing.py`)
    assert kernels(matmul_bias_relu(M, N, K, name="lin", transpose_b=True), "lin") == [Family.TRANSFORM]
    # Strided: the output pixels are a window loop (`test_window_micro_kernel.py`), and a row of 3 too short to
    # fill half the register file with 16 channels (peeled or not).
    assert kernels(make_workload("C2D", (1, 6, 6, 3, 16, 3, 2, 1)).mlir, "C2D") == []
    # A stride-1 convolution is an implicit GEMM: output pixels along a row x channels, over input channels.
    assert kernels(make_workload("C2D", (1, 14, 14, 16, 32, 3, 1, 1)).mlir, "C2D") == [Family.TRANSFORM]
    assert kernels(make_workload("NRM", (1, 256, 256)).mlir, "NRM") == []


def test_micro_kernel_sketches_are_appended_and_fix_what_is_not_a_choice(target):
    task = main_task(extract_tasks(matmul_bias_relu(M, N, K), target, "mm"))
    sketches = generate_sketches(task, target)
    transform, pipeline = [s for s in sketches if s.has(MicroKernel)]
    assert [s.family for s in (transform, pipeline)] == [Family.TRANSFORM, Family.PIPELINE]
    assert all(s.has(MicroKernel) and s.rules[-1] == "micro-kernel" for s in (transform, pipeline))
    names = {k.name for k in transform.knobs}
    assert {"micro_kernel", "consumer_fusion"} <= names and not {"cache_write", "lowering"} & names
    levels = {k.name: k.levels for k in transform.knobs if hasattr(k, "levels")}
    assert levels == {"d0": ("distribution", "cache_parallel"), "d1": ("distribution", "cache_parallel"),
                      "d2": ("cache_reduction", "vector_reduction")}
    levels = {k.name: k.levels for k in pipeline.knobs if hasattr(k, "levels")}
    assert levels == {"d0": ("distribution",), "d1": ("distribution",), "d2": ("vector_reduction",)}


@pytest.mark.parametrize("family", [Family.TRANSFORM, Family.PIPELINE])
def test_sampled_candidates_are_whole_micro_kernels(pinned, family):
    task = main_task(extract_tasks(matmul_bias_relu(256, 256, 256), pinned, "mm"))
    sketch = micro_kernel_sketch(task, pinned, family)
    (knob,) = sketch.step(MicroKernel).knobs
    first = [sample_candidate(sketch, task, pinned, random.Random(seed)) for seed in range(16)]
    assert first == [sample_candidate(sketch, task, pinned, random.Random(seed)) for seed in range(16)]
    for candidate in first:
        assert candidate is not None
        mr, nr = micro_kernel_shape(candidate.choice(knob))
        resolved = resolve(sketch, candidate, task)
        assert resolved.register[:2] == [mr, nr] and resolved.register[2] <= MAX_K_UNROLL
        assert resolved.above_register[0] >= mr and resolved.above_register[1] % nr == 0
        assert (resolved.above_register[0] % mr == 0) == (peeled_rows(resolved) is None)
        assert family is Family.TRANSFORM or peeled_rows(resolved) is None  # IREE's pipeline masks: 0.53x
        if family is Family.TRANSFORM:  # the accumulators stay for at least `MIN_CACHE_K` reduction steps
            assert resolved.above_register[2] >= MIN_CACHE_K
    rows = (256, 1) if family is Family.TRANSFORM else (1,)
    assert not is_valid(sketch, {**dict(first[0].values), "d0": rows}, task, pinned)  # a row is no block


@pytest.mark.parametrize("cpu", ["znver3", "sapphirerapids"])
def test_tiles_are_drawn_to_fit_the_register_shape(cpu):
    """Compile-free: the shape is drawn first, then row tiles of at least `mr` and column tiles of whole `nr`
    at every level above the registers, so draws are not rejected for them. GRP's implicit GEMM, whose only
    AVX-512 shape is 14x32, found no valid candidate from 32 of 50 seeds when every knob was drawn alone."""
    target = resolve_target(Target(cpu=cpu))
    task = main_task(extract_tasks(make_workload("GRP", (1, 28, 28, 8, 64, 3, 2, 1, 1, 2)).mlir, target, "GRP"))
    sketch = next(s for s in generate_sketches(task, target) if s.has(MicroKernel))
    step = sketch.step(MicroKernel)
    rows, cols = (next(k for k in sketch.knobs if getattr(k, "dim", None) == d) for d in (step.rows, step.cols))
    for shape in step.knobs[0].options:
        mr, nr = micro_kernel_shape(shape)
        lanes, floors = knob_bounds(sketch, task, target, shape)
        for seed in range(20):
            rng = random.Random(seed)
            assert min(sample_value(rows, rng, 1, floors[rows.name])) >= min(mr, rows.extent)
            assert all(t % nr == 0 for t in sample_value(cols, rng, lanes[cols.name]))
    candidates = [sample_candidate(sketch, task, target, random.Random(seed)) for seed in range(50)]
    assert all(c is not None for c in candidates)
    assert {c.choice(step.knobs[0]) for c in candidates} == set(step.knobs[0].options)


def test_a_cache_tile_of_few_reduction_steps_is_no_micro_kernel(target):
    """With `kc` below `MIN_CACHE_K` the accumulators are loaded and stored every few FMAs: rejected before
    compiling, unless the loop's largest tile is that short (an implicit GEMM's K tiles divide its channels)."""
    task = main_task(extract_tasks(matmul_bias_relu(256, 256, 256), target, "mm"))
    sketch = micro_kernel_sketch(task, target)
    values = dict(sample_candidate(sketch, task, target, random.Random(0)).values)
    assert is_valid(sketch, {**values, "d2": (MIN_CACHE_K, 1)}, task, target)
    assert not is_valid(sketch, {**values, "d2": (MIN_CACHE_K // 2, 1)}, task, target)


@pytest.mark.parametrize(("family", "shape"), [(Family.TRANSFORM, 0), (Family.TRANSFORM, 1),
                                               (Family.TRANSFORM, 2), (Family.PIPELINE, 1)])
@pytest.mark.parametrize("epilogue", [True, False])
def test_micro_kernels_build_run_match_numpy_and_keep_accumulators_in_registers(target, family, shape, epilogue):
    """Shape 2 of the transform sketch is a peeled one on AVX2 and AVX-512 hosts (6x16, 14x32 over 64 rows)."""
    mlir = matmul_bias_relu(M, N, K) if epilogue else matmul(M, N, K)
    task = main_task(extract_tasks(mlir, target, "mm"))
    sketch = micro_kernel_sketch(task, target, family)
    (knob,) = sketch.step(MicroKernel).knobs
    mr, nr = micro_kernel_shape(knob.options[shape])
    unroll = 4 if M % mr == 0 else 1  # a peeled shape has one register to spare: no unroll
    values = {"d0": (M, M), "d1": (N, N), "d2": (K, unroll), "micro_kernel": (shape,)}
    if epilogue:
        values["consumer_fusion"] = (0,)
    if family is Family.PIPELINE:
        values = {"d0": (M,), "d1": (N,), "d2": (unroll,), "micro_kernel": (shape,)}
    assert is_valid(sketch, values, task, target)
    candidate = Candidate(task.key, sketch.index, tuple(sorted(values.items())))
    flow = compile_to_phase(mlir, target.compile_flags(), "flow", "mm")
    item = build_input(task, sketch, candidate, flow)
    (build,) = LocalBuilder(target, workers=1, timeout_s=120).build([item])
    assert build.ok, f"{build.error.value} {build.message}"
    rng = np.random.default_rng(0)
    a, b, bias = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((M, K), (K, N), (N,)))
    (got,) = run_once(build.program.vmfb, "mm", [a, b, bias] if epilogue else [a, b])
    np.testing.assert_allclose(got, np.maximum(a @ b + bias, 0) if epilogue else a @ b, rtol=1e-4, atol=1e-4)
    if peeled_rows(resolve(sketch, candidate, task)) is not None:
        assert "transform.loop.peel" in item.strategy[1]
    configs = {task.key: (item.root_index, item.config)} if item.config is not None else {}
    text, _ = attach_configs(flow, configs, "mm", {task.key: item.strategy} if item.strategy else {})
    with tempfile.TemporaryDirectory() as tmp:
        (asm,) = dump_assembly(text, Path(tmp))
        loop = hot_loop(asm.read_text())
    lanes = target.vector_lanes(4)
    assert loop is not None and loop.is_micro_kernel, loop
    assert loop.fmas % (mr * nr // lanes) == 0  # whole outer products per iteration
    assert loop.shuffles == 0, loop  # every `A` element broadcast from memory, unrolled reduction steps too


def test_unrolled_reduction_steps_broadcast_a_from_memory(pinned):
    """Compile-only on both pinned CPUs: two reduction steps per iteration are two single steps, each `A`
    element a broadcast from memory. As one contraction over a 2-vector they loaded `A`'s rows as pairs and
    split them with 12 shuffles per 16 FMAs on `znver3` (24 per 32 on `znver4`); the 512^3 example's kernel ran
    0.80x as fast."""
    mlir = matmul_bias_relu(M, N, K)
    task = main_task(extract_tasks(mlir, pinned, "mm"))
    sketch = micro_kernel_sketch(task, pinned)
    (knob,) = sketch.step(MicroKernel).knobs
    lanes = pinned.vector_lanes(4)
    shape = next(i for i, (mr, nr) in enumerate(map(micro_kernel_shape, knob.options)) if M % mr == 0 and nr > lanes)
    mr, nr = micro_kernel_shape(knob.options[shape])
    values = {"d0": (M, M), "d1": (N, N), "d2": (K, 2), "micro_kernel": (shape,), "consumer_fusion": (0,)}
    assert is_valid(sketch, values, task, pinned)
    flow = compile_to_phase(mlir, pinned.compile_flags(), "flow", "mm")
    item = build_input(task, sketch, Candidate(task.key, sketch.index, tuple(sorted(values.items()))), flow)
    text, _ = attach_configs(flow, {}, "mm", {task.key: item.strategy})
    with tempfile.TemporaryDirectory() as tmp:
        (asm,) = dump_assembly(text, Path(tmp))
        loop = hot_loop(asm.read_text())
    assert loop is not None and loop.is_micro_kernel and loop.shuffles == 0, loop
    assert loop.fmas == 2 * mr * nr // lanes and loop.broadcasts == 2 * mr, loop


def test_peeled_avx2_micro_kernel_keeps_its_accumulators_in_registers():
    """Compile-only, pinned to an AVX2 CPU: 6x16 over 64 rows (10 whole row tiles, 4 rows peeled) fills 15 of
    16 ymm registers and does not spill."""
    avx2 = resolve_target(Target(cpu="znver3"))
    mlir = matmul_bias_relu(M, N, K)
    task = main_task(extract_tasks(mlir, avx2, "mm"))
    sketch = micro_kernel_sketch(task, avx2)
    (knob,) = sketch.step(MicroKernel).knobs
    values = {"d0": (M, M), "d1": (N, N), "d2": (K, 1), "micro_kernel": (knob.options.index("6x16"),),
              "consumer_fusion": (0,)}
    assert is_valid(sketch, values, task, avx2)
    assert not is_valid(sketch, {**values, "d2": (K, 2)}, task, avx2)  # one spare register: no unroll
    candidate = Candidate(task.key, sketch.index, tuple(sorted(values.items())))
    flow = compile_to_phase(mlir, avx2.compile_flags(), "flow", "mm")
    item = build_input(task, sketch, candidate, flow)
    text, _ = attach_configs(flow, {}, "mm", {task.key: item.strategy})
    with tempfile.TemporaryDirectory() as tmp:
        (asm,) = dump_assembly(text, Path(tmp))
        assembly = asm.read_text()
    loop = hot_loop(assembly)
    assert "transform.loop.peel" in item.strategy[1]
    assert loop.is_micro_kernel and loop.fmas == 12 and "zmm" not in assembly, loop


def test_stride1_conv_rows_are_single_broadcasts_not_a_strided_vector_read(pinned):
    """Compile-only on both pinned CPUs: a stride-1 convolution's micro-kernel reads each output pixel's input
    channel as one broadcast. Read as one strided `vector<mr>` (the unit window and
    channel loops folded away), IREE built it on `znver3` as a loop inserting one element per iteration
    (C2D 20x20x160->192 3x3: 20 GFLOP/s, IREE's default's speed; 2.6-2.8x with single rows); both CPUs
    had no micro-kernel loop."""
    name, shape = "C2D", (1, 10, 10, 32, 32, 3, 1, 1)
    mlir = make_workload(name, shape).mlir
    task = main_task(extract_tasks(mlir, pinned, name))
    sketch = micro_kernel_sketch(task, pinned)
    (knob,) = sketch.step(MicroKernel).knobs
    lanes = pinned.vector_lanes(4)
    # 5x16 on AVX2, 10x32 on AVX-512: whole row tiles of the 10 output columns, two vectors wide.
    mr, nr = next(micro_kernel_shape(o) for o in knob.options if micro_kernel_shape(o)[1] == 2 * lanes
                  and 10 % micro_kernel_shape(o)[0] == 0)
    values = {"d1": (10, 1), "d2": (10, 10), "d3": (32, 32), "d4": (3,), "d5": (3,), "d6": (32, 1),
              "micro_kernel": (knob.options.index(f"{mr}x{nr}"),)}
    assert is_valid(sketch, values, task, pinned)
    flow = compile_to_phase(mlir, pinned.compile_flags(), "flow", name)
    item = build_input(task, sketch, Candidate(task.key, sketch.index, tuple(sorted(values.items()))), flow)
    text, _ = attach_configs(flow, {}, name, {task.key: item.strategy})
    with tempfile.TemporaryDirectory() as tmp:
        reports = [hot_loop(path.read_text()) for path in dump_assembly(text, Path(tmp))]
    loop = max((r for r in reports if r is not None), key=lambda r: r.fmas)
    assert loop.is_micro_kernel and loop.fmas == mr * nr // lanes and loop.broadcasts == mr, loop

"""Direct-convolution micro-kernels: `mr` output pixels read through strided windows x `nr` output channels.

The rule is read from loop structure (strided and dilated windows get it, a
stride-1 convolution's pixels are ordinary rows); pinned AVX2 and AVX-512
CPUs compile sampled candidates; on the host they run, match numpy, and the
hot loop is an outer product of whole register tiles with no stores; on
pinned CPUs it has no spills either.
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
from ansor_mlir.core.schedule import REDUCTION, Candidate, MicroKernel, Sketch, micro_kernel_shape
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task, main_task
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.kernel_asm import dump_assembly, hot_loop
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.space.annotation import is_valid, sample_candidate
from ansor_mlir.space.dag import task_dag, unit_register_dims
from ansor_mlir.space.resolve import resolve
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.tuner import build_input

# 7x7x7 over 3 channels at stride 2 (the suite's C3D, smaller): output (4, 8, 8, 32), rows along ow.
C3D = ("C3D", (1, 8, 16, 16, 3, 32, 7, 2, 3))
C2D_STRIDED = ("C2D", (1, 32, 32, 3, 32, 7, 2, 3))
DIL = ("DIL", (1, 20, 20, 8, 32, 3, 2, 2, 2))
# 13 output columns (prime): no register shape divides them, the last partial row tile is peeled.
C2D_PRIME = ("C2D", (1, 26, 26, 3, 32, 3, 2, 1))


def task_of(workload: tuple[str, tuple[int, ...]], target: Target) -> Task:
    name, shape = workload
    return main_task(extract_tasks(make_workload(name, shape).mlir, target, name))


def window_sketch(task: Task, target: Target) -> Sketch | None:
    return next((s for s in generate_sketches(task, target) if "window-micro-kernel" in s.rules), None)


def sampled(sketch: Sketch, task: Task, target: Target, count: int, seed: int = 0) -> list[Candidate]:
    rng = random.Random(seed)
    found = (sample_candidate(sketch, task, target, rng) for _ in range(8 * count))
    candidates = [c for c in found if c is not None][:count]
    assert len(candidates) == count
    return candidates


@pytest.fixture(scope="module", params=["znver3", "znver4"])
def pinned(request) -> Target:
    return resolve_target(Target(cpu=request.param))


def test_rule_reads_loop_structure(target):
    for workload in (C3D, C2D_STRIDED, DIL, C2D_PRIME):
        task = task_of(workload, target)
        sketch = window_sketch(task, target)
        assert sketch is not None, workload
        step = sketch.step(MicroKernel)
        dag = task_dag(task)
        assert step.unrolled and step.rows in unit_register_dims(dag.ops[dag.root]), workload
    # Stride 1: the output pixels of a row are ordinary rows (the implicit-GEMM micro-kernel's), not unrolled.
    assert window_sketch(task_of(("C2D", (1, 14, 14, 16, 32, 3, 1, 1)), target), target) is None


def test_candidates_compile_for_pinned_cpus(pinned):
    """Compile-only: sampled candidates build for an AVX2 and an AVX-512 CPU, with shapes of that CPU."""
    task = task_of(C3D, pinned)
    sketch = window_sketch(task, pinned)
    (knob,) = sketch.step(MicroKernel).knobs
    lanes = pinned.vector_lanes(4)
    for option in knob.options:
        mr, nr = micro_kernel_shape(option)
        assert mr * nr // lanes + nr // lanes + 1 <= pinned.vector_registers
    flow = compile_to_phase(make_workload(*C3D).mlir, pinned.compile_flags(), "flow", C3D[0])
    items = [build_input(task, sketch, c, flow) for c in sampled(sketch, task, pinned, 2)]
    for build in LocalBuilder(pinned, workers=1, timeout_s=120).build(items):
        assert build.ok, f"{build.error.value} {build.message}"


@pytest.mark.parametrize("workload", [C3D, C2D_STRIDED, C2D_PRIME], ids=["C3D", "C2D", "C2D-prime"])
def test_candidates_run_match_numpy_and_unroll_whole_register_tiles(workload, target):
    name, shape = workload
    task = task_of(workload, target)
    sketch = window_sketch(task, target)
    step = sketch.step(MicroKernel)
    (knob,) = step.knobs
    work = make_workload(name, shape)
    flow = compile_to_phase(work.mlir, target.compile_flags(), "flow", name)
    candidates = sampled(sketch, task, target, 2, seed=1)
    # The largest register tile, whole, over the whole reduction: the hot loop is its outer product,
    # accumulators in registers (a sampled outer reduction tile of 1 would keep them in memory across it).
    largest = max(range(len(knob.options)), key=lambda i: np.prod(micro_kernel_shape(knob.options[i])))
    values = dict(candidates[0].values)
    values["micro_kernel"] = (largest,)
    for d in (k for k in sketch.knobs if getattr(k, "levels", ())):
        if d.dim == step.rows or (d.kind == REDUCTION and d.of_root):
            values[d.name] = tuple(d.extent for _ in d.levels)
    whole = Candidate(task.key, sketch.index, tuple(sorted(values.items())))
    assert is_valid(sketch, values, task, target)
    items = [build_input(task, sketch, c, flow) for c in (*candidates, whole)]
    for candidate, item in zip((*candidates, whole), items, strict=True):
        rows = resolve(sketch, candidate, task).register[step.rows]
        assert (f"factor = {rows}" in item.strategy[1]) == (rows > 1)  # the rows are unrolled
    assert_builds_match_reference(target, items, work)
    mr, nr = micro_kernel_shape(knob.options[largest])
    text, _ = attach_configs(flow, {}, name, {task.key: items[-1].strategy})
    with tempfile.TemporaryDirectory() as tmp:
        reports = [hot_loop(path.read_text()) for path in dump_assembly(text, Path(tmp))]
    loop = max((r for r in reports if r is not None), key=lambda r: r.fmas)
    # Accumulators are never written back inside the loop. Whether LLVM also spills nothing there depends on
    # its schedule for the CPU (znver4 hoists all three channels' weight vectors at 14x32 and spills 9, where
    # sapphirerapids spills none), so spill-freedom is checked compile-only on pinned CPUs (below).
    assert loop.fmas and loop.vector_stores == 0 and loop.gathers == 0, (knob.options[largest], loop)
    assert loop.fmas % (mr * nr // target.vector_lanes(4)) == 0, loop


# 14 output columns of 3 channels: the tight register tiles (one register to spare) apply, 6x16 peeled on AVX2.
C3D_WIDE = ("C3D", (1, 4, 28, 28, 3, 32, 7, 2, 3))


@pytest.mark.parametrize(("cpu", "shape"), [("znver3", "6x16"), ("sapphirerapids", "14x32")])
def test_tight_tiles_keep_the_whole_channel_unroll_without_spills(cpu, shape):
    """Compile-only: a window micro-kernel offers the tight tile with its 3 input channels unrolled whole, and
    its hot loop holds every accumulator in registers (an ordinary micro-kernel offers none with `k` unrolled)."""
    target = resolve_target(Target(cpu=cpu))
    task = task_of(C3D_WIDE, target)
    sketch = window_sketch(task, target)
    (knob,) = sketch.step(MicroKernel).knobs
    assert shape in knob.options, knob.options
    candidate = next(c for c in (sample_candidate(sketch, task, target, random.Random(s)) for s in range(400))
                     if c is not None and c.choice(knob) == shape)
    flow = compile_to_phase(make_workload(*C3D_WIDE).mlir, target.compile_flags(), "flow", C3D_WIDE[0])
    text, _ = attach_configs(flow, {}, C3D_WIDE[0], {task.key: build_input(task, sketch, candidate, flow).strategy})
    with tempfile.TemporaryDirectory() as tmp:
        reports = [hot_loop(path.read_text()) for path in dump_assembly(text, Path(tmp))]
    loop = max((r for r in reports if r is not None), key=lambda r: r.fmas)
    mr, nr = micro_kernel_shape(shape)
    assert loop.fmas == mr * nr // target.vector_lanes(4) * 3 and loop.spills == 0, loop

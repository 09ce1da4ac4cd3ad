"""Candidates fit the CPU they are sampled for, whatever the host.

For every suite entry (at `test_suite_candidates`' small shapes) and both
pinned CPUs, an AVX2 one (znver3: 8 f32 lanes, 16 ymm, IREE's vector limit
16 KiB) and an AVX-512 one (znver4: 16 lanes, 32 zmm, 32 KiB), many
candidates are sampled from every open sketch; for znver3, the ones with the
largest register tiles (the likeliest to cross IREE's limits) are compiled
with the real compiler. A tuned program compiled for an AVX2 CPU runs on
this host and matches numpy (any x86-64 host with AVX2 and FMA runs it).
"""

from __future__ import annotations

import random
from math import prod

import numpy as np
import pytest
from conftest import AVX2_CPU, PINNED_CPUS, matmul_bias_relu, pinned_target
from test_suite_candidates import SMALL_SHAPES

from ansor_bench.workloads import make_workload
from ansor_mlir import api
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import main_task
from ansor_mlir.database.records import read_records
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.compare import run_once
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.mlir.iree_compiler import compile_to_phase, compile_vmfb
from ansor_mlir.space.annotation import sample_candidate, vector_tiles
from ansor_mlir.space.limits import limits
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.tuner import TuneOptions, build_input

SAMPLES_PER_SKETCH = 12
COMPILED_PER_ENTRY = 3
# An Intel AVX2 baseline: AMD Zen and every later Intel CPU run its code.
AVX2_RUNNABLE_CPU = "haswell"


def sampled(name: str, cpu: str):
    """(workload, task, [(sketch, candidate)]): SAMPLES_PER_SKETCH seeded draws of every open sketch."""
    target = pinned_target(cpu)
    workload = make_workload(name, SMALL_SHAPES[name])
    task = main_task(extract_tasks(workload.mlir, target, name))
    rng = random.Random(0)
    picks = []
    for sketch in (s for s in generate_sketches(task, target) if s.knobs):
        drawn = [sample_candidate(sketch, task, target, rng) for _ in range(SAMPLES_PER_SKETCH)]
        assert any(drawn), f"{name} on {cpu}: sketch {sketch.index} {sketch.rules} has no valid candidate"
        picks += [(sketch, c) for c in drawn if c is not None]
    return workload, task, picks


def register_volume(sketch, candidate) -> int:
    return prod(vector_tiles(sketch, dict(candidate.values)).values())


def test_limits_come_from_the_target():
    avx2, avx512 = (limits(pinned_target(cpu)) for cpu in PINNED_CPUS)
    # Half IREE's vector-size limit; accumulators in the register file less 4 operand registers.
    assert (avx2.vector_bytes, avx2.accumulator_bytes, avx2.stack_bytes) == (8192, 12 * 32, 32 * 1024)
    assert (avx512.vector_bytes, avx512.accumulator_bytes, avx512.stack_bytes) == (16384, 28 * 64, 32 * 1024)


@pytest.mark.parametrize("name", list(SMALL_SHAPES))
def test_sampled_candidates_compile_for_avx2(name):
    for cpu in PINNED_CPUS:
        sampled(name, cpu)
    workload, task, picks = sampled(name, AVX2_CPU)
    target = pinned_target(AVX2_CPU)
    unique = {c.identity: (s, c) for s, c in picks}
    largest = sorted(unique.values(), key=lambda p: (-register_volume(*p), p[1].identity))[:COMPILED_PER_ENTRY]
    flow = compile_to_phase(workload.mlir, target.compile_flags(), "flow", name)
    builds = LocalBuilder(target, workers=2, timeout_s=120).build([build_input(task, s, c, flow) for s, c in largest])
    failed = [(s.rules, dict(c.values), b.message) for (s, c), b in zip(largest, builds, strict=True) if not b.ok]
    assert not failed, f"{name} on {AVX2_CPU}: {failed}"


def test_avx2_tuned_program_runs_on_this_host(tmp_path):
    host = resolve_target(Target())
    if not {"avx2", "fma"} <= set(host.cpu_features):
        pytest.skip("this host cannot run AVX2 code")
    avx2 = pinned_target(AVX2_RUNNABLE_CPU)
    assert (avx2.vector_bytes, avx2.vector_registers) == (32, 16)
    module = matmul_bias_relu(64, 48, 32)
    log = tmp_path / "log.jsonl"
    options = TuneOptions(trials=5, log=log, seed=0, policy="random", progress=False, batch_size=2)
    result = api.tune(module, avx2, options=options)
    records = read_records(log)
    assert all(r.target == f"llvm-cpu:{AVX2_RUNNABLE_CPU}:t1" for r in records)
    # Candidates compiled for the AVX2 CPU ran here and matched IREE's default.
    assert any(r.ok and not r.is_default for r in records), [r.result.message for r in records]
    out = tmp_path / "tuned.vmfb"
    assert compile_vmfb(result.module, [], out).ok
    data = np.random.default_rng(0)
    a, b, bias = (data.uniform(-1, 1, s).astype(np.float32) for s in ((64, 32), (32, 48), (48,)))
    (got,) = run_once(out, "mm", [a, b, bias])
    np.testing.assert_allclose(got, np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-4)

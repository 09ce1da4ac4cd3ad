"""CUDA targets and GPU sketches, compile-only for sm_80: no test here needs a GPU.

Candidates of every GPU sketch of a matmul (f32, and f16 on tensor cores), a 3x3 convolution, softmax and a
row reduction are built by the tuner's own builder for `--iree-hal-target-device=cuda --iree-cuda-target=sm_80`.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ansor_mlir import api
from ansor_mlir.codegen.tuning_spec import render_spec
from ansor_mlir.core.schedule import Sketch
from ansor_mlir.core.target import parse_target
from ansor_mlir.core.task import IreeConfig
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.batch_bundle import read_batch
from ansor_mlir.measure.gpu_device import no_device_message
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.measure.offline_runner import batch_target
from ansor_mlir.mlir.iree_compiler import compile_to_phase, compile_vmfb, first_error_line, tuning_spec_flags
from ansor_mlir.model.features import FEATURE_NAMES, featurize
from ansor_mlir.space.annotation import is_valid, sample_candidate
from ansor_mlir.space.gpu_mapping import gpu_mapping
from ansor_mlir.space.resolve import render_config
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.tuner import build_input, task_module

GPU_INPUTS = Path(__file__).resolve().parents[2] / "examples" / "gpu"


@pytest.fixture(scope="module")
def sm80():
    return resolve_target(parse_target("cuda:sm_80"))


@pytest.fixture(scope="module")
def gpu_tasks(sm80):
    return {op: extract_tasks((GPU_INPUTS / f"{op}.mlir").read_text(), sm80, op)
            for op in ("matmul", "matmul_f16", "conv3x3", "softmax", "row_reduction")}


def test_cuda_target_is_data_read_from_iree(sm80):
    assert sm80.key == "cuda:sm_80"
    assert sm80.compile_flags() == ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80"]
    gpu = sm80.gpu
    assert (gpu.sm_count, gpu.warp_size, gpu.max_threads) == (108, 32, 1024)
    assert gpu.shared_memory_bytes == 166912  # IREE's max_workgroup_memory_bytes for sm_80
    f16 = [s for s in gpu.mma_shapes if (s.a_type, s.b_type, s.c_type) == ("f16", "f16", "f32")]
    assert ("NV_MMA_SYNC_F32_16x8x16_F16", 16, 8, 16) in [(s.name, s.m, s.n, s.k) for s in f16]
    assert parse_target("cuda").key == "cuda:sm_80"


def test_unknown_architecture_is_one_line():
    with pytest.raises(AnsorError, match=r"unknown CUDA architecture 'sm_90'.*sm_80, sm_86, sm_89"):
        parse_target("cuda:sm_90")


def test_rules_follow_loop_structure_and_element_types(gpu_tasks, sm80):
    def rules(op: str, index: int = 0) -> list[tuple[str, ...]]:
        return [s.rules for s in generate_sketches(gpu_tasks[op][index], sm80)]

    assert rules("matmul") == [("iree-default",), ("gpu-multi-level-tiling",), ("gpu-td-multi-level-tiling",)]
    assert ("gpu-multi-level-tiling", "tensor-core") in rules("matmul_f16")
    assert ("cross-thread-reduction",) in rules("row_reduction")
    assert ("cross-thread-reduction",) not in rules("conv3x3")  # three reductions, many outputs
    assert all(("cross-thread-reduction",) in rules("softmax", i) for i in range(len(gpu_tasks["softmax"])))
    # A transform strategy tiles a root that is its dispatch's last op: not softmax's sum before its division.
    assert ("gpu-td-multi-level-tiling",) not in rules("softmax", 1)
    assert ("gpu-td-multi-level-tiling",) in rules("conv3x3")


def test_candidates_compile_for_sm80(gpu_tasks, sm80):
    """One random candidate of every GPU sketch of every op builds (PTX embedded, nothing run): IREE's GPU
    pipelines configured, and transform-dialect strategies."""
    rng = random.Random(0)
    built = []
    with LocalBuilder(sm80, workers=2) as builder:
        for op, tasks in gpu_tasks.items():
            for task in tasks:
                flow = compile_to_phase(task_module(task), sm80.compile_flags(), "flow", task.name)
                for sketch in generate_sketches(task, sm80)[1:]:
                    candidate = sample_candidate(sketch, task, sm80, rng)
                    assert candidate is not None, (op, sketch.rules)
                    built.append((op, sketch.rules, builder.submit(build_input(task, sketch, candidate, flow))))
        failures = [(op, rules, f.result().message) for op, rules, f in built if not f.result().ok]
    assert not failures
    assert len(built) >= 9
    assert all(f.result().program.vmfb for _, _, f in built)


def test_mapping_respects_target_limits(gpu_tasks, sm80):
    task = gpu_tasks["matmul"][0]
    sketch = generate_sketches(task, sm80)[1]
    # 512 / 1 x 512 / 1 threads per block: over the 1024 a block may have.
    too_many = {"d0": (512, 1), "d1": (512, 1), "d2": (8,), "promote_operands": (0,)}
    assert not is_valid(sketch, too_many, task, sm80)
    fine = {"d0": (64, 4), "d1": (64, 4), "d2": (16,), "promote_operands": (0,)}
    assert is_valid(sketch, fine, task, sm80)
    candidate = sample_candidate(sketch, task, sm80, random.Random(3))
    mapping = gpu_mapping(sketch, candidate, task)
    assert 32 <= mapping.threads <= 1024 and mapping.shared_bytes <= sm80.gpu.shared_memory_bytes
    assert mapping.config.gpu.workgroup_size[0] == mapping.threads
    assert len(featurize(task, sketch, candidate, sm80)) == len(FEATURE_NAMES)


def test_gpu_traces_and_configs_replay(gpu_tasks, sm80):
    """A record carries the trace and the configuration; both come back equal (GPU steps, GPU launch)."""
    for op in ("matmul_f16", "row_reduction"):
        task = gpu_tasks[op][0]
        for sketch in generate_sketches(task, sm80)[1:]:
            assert Sketch.from_trace(sketch.trace(), task.key, sketch.index, sketch.rules) == sketch
            candidate = sample_candidate(sketch, task, sm80, random.Random(1))
            config = render_config(sketch, candidate, task)
            assert IreeConfig.from_dict(config.to_dict()) == config


def test_tuning_spec_carries_a_gpu_configuration(gpu_tasks, sm80, tmp_path):
    """The spec plugs a GPU configuration into a plain `iree-compile` for sm_80, as for CPUs."""
    task = gpu_tasks["matmul_f16"][0]
    sketch = next(s for s in generate_sketches(task, sm80) if "tensor-core" in s.rules)
    config = render_config(sketch, sample_candidate(sketch, task, sm80, random.Random(2)), task)
    spec = tmp_path / "spec.mlir"
    spec.write_text(render_spec([(task, config)]))
    assert "#iree_gpu.mma_layout<NV_MMA_SYNC_F32_16x8x16_F16>" in spec.read_text()
    flags = [*sm80.compile_flags(), *tuning_spec_flags(spec)]
    result = compile_vmfb(task_module(task), flags, tmp_path / "tuned.vmfb")
    assert result.ok, first_error_line(result.stderr)


def test_timing_without_a_cuda_device_says_what_to_do(sm80, tmp_path):
    if no_device_message(sm80) is None:
        pytest.skip("this host has a CUDA device")
    with pytest.raises(AnsorError, match="no CUDA device on this host.*trials=0.*ansor-measure export"):
        api.tune(GPU_INPUTS / "row_reduction.mlir", target="cuda:sm_80", trials=2, log=tmp_path / "L.jsonl")


def test_cuda_batch_exports_for_the_offline_runner(tmp_path):
    """Built here with no GPU, a CUDA batch names its target; the offline runner times it on the `cuda` device."""
    api.export_batch(GPU_INPUTS / "row_reduction.mlir", tmp_path / "b.zip", target="cuda:sm_80", candidates=2,
                     log=tmp_path / "L.jsonl")
    batch = read_batch(tmp_path / "b.zip")
    assert batch.target == "cuda:sm_80" and len(batch.items) >= 2
    assert batch_target(batch.target, batch.threads).runtime_device() == "cuda"

"""aarch64 targets: named ARM CPUs as data, and tuning for them on this x86-64 host with qemu verifying.

Compile-only checks hold anywhere; the ones that run aarch64 code need
qemu-user and IREE's aarch64 runtime (`tools/install_qemu_aarch64.sh`, which
`tools/run_tests.sh` calls) and skip with the reason when they are missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import matmul_bias_relu

from ansor_mlir import api
from ansor_mlir.core.target import parse_target
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.measure.arrays import encode_array
from ansor_mlir.measure.builder import BuildInput
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.measure.qemu_runner import QemuRunner, find_emulated_runtime
from ansor_mlir.measure.runner import RunInput
from ansor_mlir.mlir.iree_compiler import compile_to_phase, run_tool

RUNTIME = find_emulated_runtime("aarch64")
needs_qemu = pytest.mark.skipif(isinstance(RUNTIME, str), reason=f"no aarch64 emulation: {RUNTIME}")
SMALL = matmul_bias_relu(32, 64, 32, name="mm")


@pytest.mark.parametrize("cpu", ["neoverse-v1", "neoverse-n1", "cortex-a76"])
def test_named_arm_cpus_resolve_to_neon(cpu):
    target = resolve_target(parse_target(f"aarch64:{cpu}", threads=2))
    assert target.arch == "aarch64" and not target.runs_here
    assert target.key == f"llvm-cpu:{cpu}:aarch64-unknown-linux-gnu:t2"
    assert target.vector_bytes == 16 and target.vector_lanes(4) == 4  # what IREE vectorizes for: NEON
    assert target.vector_registers == 32 and "neon" in target.cpu_features
    assert target.l1_bytes == 64 * 1024 and target.cores >= 4
    assert ("sve" in target.cpu_features) == (cpu == "neoverse-v1")


def test_bad_arm_targets_are_one_line_errors():
    with pytest.raises(AnsorError, match="named aarch64 CPUs are aarch64:neoverse-v1"):
        parse_target("aarch64:pentium")
    with pytest.raises(AnsorError, match="names its CPU: drop cpu=znver3"):
        parse_target("aarch64:neoverse-v1", cpu="znver3")
    with pytest.raises(AnsorError, match="invalid target='arm64': valid choices are llvm-cpu, aarch64:neoverse-v1"):
        api.extract_tasks(SMALL, target="arm64")


@needs_qemu
def test_qemu_runner_checks_outputs_and_never_times(tmp_path: Path):
    target = resolve_target(parse_target("aarch64:neoverse-n1"))
    task = api.extract_tasks(SMALL, target)[0]
    flow = compile_to_phase(task.func_text, target.compile_flags(), "flow", task.name)
    (build,) = LocalBuilder(target).build([BuildInput(task.key, flow, task.root_index, None)])
    rng = np.random.default_rng(0)
    a, b, bias = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((32, 32), (32, 64), (64,)))
    expected = np.maximum(a @ b + bias, 0)
    inputs = tuple(encode_array(x) for x in (a, b, bias))
    with QemuRunner(RUNTIME) as runner:
        good = runner.submit(RunInput(build.program, inputs, (encode_array(expected),))).result().measured
        bad = runner.submit(RunInput(build.program, inputs, (encode_array(expected + 0.5),))).result().measured
    assert good.error.value == "not_measured" and good.median_s is None and good.max_abs_error < 1e-4
    assert "verified under qemu-aarch64" in good.message
    assert bad.error.value == "wrong_answer"


@needs_qemu
def test_tuning_for_neoverse_v1_ranks_by_model_and_verifies_under_qemu(tmp_path: Path, capsys):
    log = tmp_path / "arm.jsonl"
    result = api.tune(SMALL, target="aarch64:neoverse-v1", trials=3, log=log, progress=False)
    err = capsys.readouterr().err
    assert "ranked by the cost model" in err and "verified under qemu" in err
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(line["result"]["median_s"] is None for line in lines)  # nothing emulated is a time
    assert all(line["target"] == "llvm-cpu:neoverse-v1:aarch64-unknown-linux-gnu:t1" for line in lines)
    chosen = lines[-1]["result"]
    assert chosen["error"] == "not_measured" and "verified under qemu-aarch64" in chosen["message"]
    assert len(lines) <= 1 + 3  # IREE's default, then at most `trials` picks
    # The tuned module is for aarch64 and plain iree-compile builds it.
    out = tmp_path / "tuned.mlir"
    out.write_text(result.module)
    built = run_tool("iree-compile", [str(out), "-o", str(tmp_path / "tuned.vmfb")])
    assert built.ok, built.stderr
    assert "embedded-elf-arm_64" in result.module

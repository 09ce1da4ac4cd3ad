"""A convolution whose result is stored into part of its output (a consumer's pad folded into the store, as
ResNet's convolutions before a 3x3 one): every transform family builds it and computes what numpy does.

Before the strategy moved IREE's `map_store` into the workgroup loop, every candidate of such a dispatch
allocated the whole result on the stack and failed to compile (3.2 MB for ResNet's first convolution)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ansor_mlir.core.schedule import Family
from ansor_mlir.core.task import main_task
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.compare import load_function
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.space.annotation import sample_candidate
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.tuner import build_input

SIZE, CHANNELS = 16, 64  # a 64 KiB result: twice IREE's 32 KiB stack limit


def program(weights: np.ndarray) -> str:
    """conv3x3(pad(x)) + 0.5, ReLU, padded by one for a consumer that is not there: the pad folds into the store."""
    x = f"1x{SIZE}x{SIZE}x{CHANNELS}xf32"
    p = f"1x{SIZE + 2}x{SIZE + 2}x{CHANNELS}xf32"
    w = f"3x3x{CHANNELS}x{CHANNELS}xf32"
    hexed = weights.tobytes().hex().upper()
    return (
        f"func.func @main(%x: tensor<{x}>) -> tensor<{p}> {{\n"
        "  %zero = arith.constant 0.0 : f32\n  %half = arith.constant 0.5 : f32\n"
        f'  %w = arith.constant dense<"0x{hexed}"> : tensor<{w}>\n'
        "  %p = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {\n"
        "  ^bb0(%a: index, %b: index, %c: index, %d: index):\n"
        f"    tensor.yield %zero : f32\n  }} : tensor<{x}> to tensor<{p}>\n"
        f"  %e = tensor.empty() : tensor<{x}>\n"
        f"  %f = linalg.fill ins(%half : f32) outs(%e : tensor<{x}>) -> tensor<{x}>\n"
        "  %r = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}"
        f" ins(%p, %w : tensor<{p}>, tensor<{w}>) outs(%f : tensor<{x}>) -> tensor<{x}>\n"
        "  %relu = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, "
        "affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = [\"parallel\", \"parallel\", \"parallel\", "
        f"\"parallel\"]}} ins(%r : tensor<{x}>) outs(%e : tensor<{x}>) {{\n  ^bb0(%i: f32, %o: f32):\n"
        f"    %m = arith.maximumf %i, %zero : f32\n    linalg.yield %m : f32\n  }} -> tensor<{x}>\n"
        "  %q = tensor.pad %relu low[0, 1, 1, 0] high[0, 1, 1, 0] {\n"
        "  ^bb0(%a: index, %b: index, %c: index, %d: index):\n"
        f"    tensor.yield %zero : f32\n  }} : tensor<{x}> to tensor<{p}>\n"
        f"  return %q : tensor<{p}>\n}}\n")


def reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = 0.5 + sum(np.einsum("nhwc,ck->nhwk", padded[:, i:i + SIZE, j:j + SIZE, :], w[i, j])
                    for i in range(3) for j in range(3))
    return np.pad(np.maximum(out, 0.0), ((0, 0), (1, 1), (1, 1), (0, 0)))


@pytest.fixture(scope="module")
def case(target):
    w = np.random.default_rng(0).standard_normal((3, 3, CHANNELS, CHANNELS)).astype(np.float32) / 8
    text = program(w)
    task = main_task(extract_tasks(text, target, "sliced"))
    return text, task, w


def test_the_convolution_task_stores_into_part_of_its_output(case):
    _, task, _ = case
    assert task.stores_into_slice


def test_a_candidate_of_every_transform_sketch_builds_and_matches_numpy(case, target, tmp_path):
    text, task, w = case
    sketches = [s for s in generate_sketches(task, target) if s.family is Family.TRANSFORM and s.knobs]
    assert sketches
    rng = random.Random(1)
    candidates = [(s, sample_candidate(s, task, target, rng)) for s in sketches]
    assert all(c is not None for _, c in candidates)
    flow = compile_to_phase(text, target.compile_flags(), "flow", "sliced")
    builds = LocalBuilder(target, workers=2, timeout_s=120).build(
        [build_input(task, s, c, flow) for s, c in candidates])
    x = np.random.default_rng(2).standard_normal((1, SIZE, SIZE, CHANNELS)).astype(np.float32)
    expected = reference(x, w)
    for (sketch, candidate), build in zip(candidates, builds, strict=True):
        what = f"{sketch.rules} {dict(candidate.values)}"
        assert build.ok, f"{what}: {build.error.value} {build.message}"
        path = tmp_path / f"s{sketch.index}.vmfb"
        path.write_bytes(build.program.vmfb)
        fn, _ = load_function(path, "main")
        np.testing.assert_allclose(np.asarray(fn(x)), expected, rtol=2e-4, atol=2e-4, err_msg=what)

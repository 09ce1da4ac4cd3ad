"""The Ansor suite workloads: each compiles with real IREE, runs, and matches numpy."""

from __future__ import annotations

from math import prod

import iree.compiler as ic
import numpy as np
import pytest

from ansor_bench.workloads import make_workload, suite_names, suite_shapes, suite_workloads
from ansor_mlir.errors import AnsorError
from ansor_mlir.measure.compare import run_once
from ansor_mlir.mlir.context import parse_module

# Reduced shapes (same arity as the suite rows) that compile in well under a second.
SMALL = {
    "GMM": (2, 16, 8, 12),
    "C1D": (1, 12, 8, 16, 3, 2, 1),
    "C2D": (1, 10, 10, 8, 16, 3, 2, 1),
    "C3D": (1, 6, 8, 8, 4, 8, 3, 1, 1),
    "GRP": (1, 10, 10, 8, 16, 3, 2, 1, 1, 4),
    "DIL": (1, 12, 12, 8, 8, 3, 1, 1, 2),
    "DEP": (1, 10, 10, 16, 3, 2, 1),
    "T2D": (1, 4, 4, 8, 8, 4, 2, 1),
    "CAP": (1, 8, 8, 4, 8, 3, 2, 1),
    "NRM": (2, 16, 24),
    "ConvLayer": (1, 10, 10, 8, 16, 3, 2, 1),
    "TBS": (1, 16, 2, 8),
    "softmax": (16, 32),
}


def expected_flops(name: str, a: tuple[int, ...]) -> int:
    """The documented flop convention, written out independently per entry."""
    def out(size: int, k: int, s: int, p: int, d: int = 1) -> int:
        return (size + 2 * p - d * (k - 1) - 1) // s + 1

    if name == "GMM":
        b, n, m, k = a
        return 2 * b * n * m * k
    if name == "C1D":
        n, ln, ci, co, k, s, p = a
        return 2 * n * out(ln, k, s, p) * co * ci * k
    if name in ("C2D", "ConvLayer"):
        n, h, w, ci, co, k, s, p = a
        outputs = n * out(h, k, s, p) * out(w, k, s, p) * co
        return 2 * outputs * ci * k * k + (4 * outputs if name == "ConvLayer" else 0)
    if name == "C3D":
        n, d, h, w, ci, co, k, s, p = a
        return 2 * n * out(d, k, s, p) * out(h, k, s, p) * out(w, k, s, p) * co * ci * k**3
    if name == "GRP":
        n, h, w, ci, co, k, s, p, dil, g = a
        return 2 * n * out(h, k, s, p, dil) * out(w, k, s, p, dil) * co * (ci // g) * k * k
    if name == "DIL":
        n, h, w, ci, co, k, s, p, dil = a
        return 2 * n * out(h, k, s, p, dil) * out(w, k, s, p, dil) * co * ci * k * k
    if name == "DEP":
        n, h, w, c, k, s, p = a
        return 2 * n * out(h, k, s, p) * out(w, k, s, p) * c * k * k
    if name == "T2D":
        n, h, w, ci, co, k, s, p = a
        return 2 * n * ((h - 1) * s - 2 * p + k) * ((w - 1) * s - 2 * p + k) * co * ci * k * k
    if name == "CAP":
        n, h, w, ci, co, k, s, p = a
        return 2 * n * out(h, k, s, p) * out(w, k, s, p) * 4 * 4 * co * k * k * 4 * ci
    if name == "NRM":
        return 2 * prod(a)
    if name == "TBS":
        b, s, h, d = a
        return 2 * b * h * s * s * d
    assert name == "softmax"
    return 5 * prod(a)


def test_every_suite_entry_has_a_small_shape():
    assert sorted(suite_names()) == sorted(SMALL)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_small_shape_compiles_runs_and_matches_numpy(name, tmp_path):
    w = make_workload(name, SMALL[name])
    vmfb = tmp_path / f"{w.func_name}.vmfb"
    vmfb.write_bytes(
        ic.compile_str(w.mlir, target_backends=["llvm-cpu"], extra_args=["--iree-llvmcpu-target-cpu=host"])
    )
    inputs = w.inputs(seed=1)
    assert [x.shape for x in inputs] == list(w.input_shapes)
    outputs = run_once(vmfb, w.func_name, inputs)
    references = w.reference(inputs)
    assert [o.shape for o in outputs] == list(w.output_shapes)
    for got, want in zip(outputs, references, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(want))))
    assert w.flops == expected_flops(name, SMALL[name])
    assert w.min_bytes == 4 * sum(prod(s) for s in (*w.input_shapes, *w.output_shapes))


@pytest.mark.parametrize("workload", suite_workloads(first_only=True), ids=lambda w: w.label)
def test_bundled_first_shape_generates_valid_mlir(workload):
    module = parse_module(workload.mlir, workload.label)
    funcs = [op for op in module.body.operations if op.operation.name == "func.func"]
    assert [str(f.attributes["sym_name"]).strip('"') for f in funcs] == [workload.func_name]
    assert "?" not in workload.mlir
    assert workload.shape == suite_shapes(workload.name)[0]
    assert workload.flops == expected_flops(workload.name, workload.shape)


def test_suite_workloads_lists_every_bundled_shape():
    gmm = suite_workloads(["GMM"])
    assert [w.label for w in gmm] == [f"GMM({','.join(map(str, s))})" for s in suite_shapes("GMM")]
    assert len(gmm) == 4


def test_inputs_are_seeded():
    w = make_workload("GMM", SMALL["GMM"])
    assert all(np.array_equal(a, b) for a, b in zip(w.inputs(3), w.inputs(3), strict=True))
    assert not np.array_equal(w.inputs(3)[0], w.inputs(4)[0])
    assert all(x.dtype == np.float32 and np.abs(x).max() <= 1.0 for x in w.inputs())


def test_wrong_arity_names_the_op_and_the_args():
    with pytest.raises(AnsorError, match=r"C2D: expected 8 shape values \(N, H, W, CI, CO, k, s, p\), got 3"):
        make_workload("C2D", (1, 2, 3))


@pytest.mark.parametrize(
    ("name", "shape", "message"),
    [
        ("GRP", (1, 8, 8, 6, 8, 3, 1, 1, 1, 4), "GRP: CI=6 is not divisible by groups=4"),
        ("C2D", (1, 4, 4, 8, 8, 7, 1, 0), "C2D: kernel 7"),
        ("DEP", (1, 8, 8, 0, 3, 1, 1), "DEP: C=0 must be positive"),
        ("T2D", (1, 4, 4, 8, 8, 3, 2, 3), "T2D: padding p=3 must be at most k-1=2"),
        ("softmax", (4, 2.5), "softmax: cols=2.5 must be an integer"),
        ("XYZ", (1,), "unknown workload 'XYZ'"),
    ],
)
def test_invalid_shapes_are_rejected(name, shape, message):
    with pytest.raises(AnsorError, match=message.replace("(", r"\(")):
        make_workload(name, shape)

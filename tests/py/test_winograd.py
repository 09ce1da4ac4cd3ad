"""Winograd rewrite: the 3x3 stride-1 convolutions it repays become IREE's F(6x6, 3x3) ops, built with their
filter transform evaluated at compile time, and computing what the direct convolution computes."""

from __future__ import annotations

import numpy as np
import pytest

from ansor_mlir.core.target import Target
from ansor_mlir.frontend.program_rewrites import DEFAULT_REWRITES, SEPARATOR, parse_rewrites, rewrite_program
from ansor_mlir.frontend.winograd import NAME, transform_matrices
from ansor_mlir.measure.compare import load_function
from ansor_mlir.mlir.iree_compiler import (
    WINOGRAD_FILTER_MARK,
    WINOGRAD_HOIST_FLAG,
    compile_to_phase,
    compile_vmfb,
    winograd_flags,
)

WITH_WINOGRAD = SEPARATOR.join((DEFAULT_REWRITES, NAME))


def conv(size: int, channels: int, stride: int = 1, weights: np.ndarray | None = None, init: float = 0.0) -> str:
    """A padded 3x3 NHWC convolution accumulating into `init` (a bias), and ReLU; the filter is a constant, or
    the function's second argument."""
    out = (size + 2 - 3) // stride + 1
    x, p = f"1x{size}x{size}x{channels}xf32", f"1x{size + 2}x{size + 2}x{channels}xf32"
    y = f"1x{out}x{out}x{channels}xf32"
    w = f"3x3x{channels}x{channels}xf32"
    if weights is None:
        header, filt = f"%x: tensor<{x}>, %w: tensor<{w}>", ""
    else:
        header = f"%x: tensor<{x}>"
        filt = f'  %w = arith.constant dense<"0x{weights.tobytes().hex().upper()}"> : tensor<{w}>\n'
    return (
        f"func.func @main({header}) -> tensor<{y}> {{\n  %zero = arith.constant 0.0 : f32\n"
        f"  %init = arith.constant {init!r} : f32\n{filt}"
        f"  %p = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {{\n"
        f"  ^bb0(%a: index, %b: index, %c: index, %d: index):\n"
        f"    tensor.yield %zero : f32\n  }} : tensor<{x}> to tensor<{p}>\n"
        f"  %e = tensor.empty() : tensor<{y}>\n"
        f"  %f = linalg.fill ins(%init : f32) outs(%e : tensor<{y}>) -> tensor<{y}>\n"
        f"  %r = linalg.conv_2d_nhwc_hwcf {{dilations = dense<1> : tensor<2xi64>, strides = dense<{stride}> : "
        f"tensor<2xi64>}} ins(%p, %w : tensor<{p}>, tensor<{w}>) outs(%f : tensor<{y}>) -> tensor<{y}>\n"
        f"  %relu = linalg.generic {{indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, "
        f"affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = [\"parallel\", \"parallel\", \"parallel\", "
        f"\"parallel\"]}} ins(%r : tensor<{y}>) outs(%e : tensor<{y}>) {{\n  ^bb0(%i: f32, %o: f32):\n"
        f"    %m = arith.maximumf %i, %zero : f32\n    linalg.yield %m : f32\n  }} -> tensor<{y}>\n"
        f"  return %relu : tensor<{y}>\n}}\n")


def reference(x: np.ndarray, w: np.ndarray, init: float = 0.0) -> np.ndarray:
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    h, wd = x.shape[1], x.shape[2]
    out = sum(np.einsum("nhwc,ck->nhwk", padded[:, i:i + h, j:j + wd, :], w[i, j]) for i in range(3) for j in range(3))
    return np.maximum(out + init, 0.0)


def weights(channels: int) -> np.ndarray:
    return np.random.default_rng(1).standard_normal((3, 3, channels, channels)).astype(np.float32)


def test_transform_matrices_compute_a_6x6_tile_of_a_3x3_correlation():
    at, g, bt = transform_matrices()
    rng = np.random.default_rng(0)
    tile, taps = rng.standard_normal((8, 8)), rng.standard_normal((3, 3))
    direct = [[(tile[i:i + 3, j:j + 3] * taps).sum() for j in range(6)] for i in range(6)]
    np.testing.assert_allclose(at @ ((g @ taps @ g.T) * (bt @ tile @ bt.T)) @ at.T, direct, atol=1e-12)


def test_the_rewrite_is_named_and_opt_in():
    assert NAME in parse_rewrites(WITH_WINOGRAD)
    assert NAME not in parse_rewrites(DEFAULT_REWRITES)


@pytest.mark.parametrize("program", [
    conv(4, 8, weights=weights(8)),  # 1 tile: the batched matmul would re-read its weights for one row
    conv(28, 8, stride=2, weights=weights(8)),  # strided: no Winograd form
    conv(28, 8),  # weights given at each call: the filter transform would run every call
], ids=["too-few-tiles", "strided", "filter-not-constant"])
def test_convolutions_winograd_does_not_repay_are_left(program):
    assert rewrite_program(program, (NAME,), "test").text == program


@pytest.mark.parametrize("init", [0.0, 0.5], ids=["zeros", "bias"])
def test_converted_program_builds_with_the_filter_transformed_once_and_matches_the_direct_convolution(init, tmp_path):
    w = weights(8)
    program = conv(28, 8, weights=w, init=init)
    changed = rewrite_program(program, (NAME,), "test")
    assert changed.applied == ((NAME, 1),)
    assert "linalg.batch_matmul" in changed.text and "linalg.conv_2d_nhwc_hwcf" not in changed.text
    assert winograd_flags(changed.text) == [WINOGRAD_HOIST_FLAG] and winograd_flags(program) == []
    target = Target()
    flow = compile_to_phase(changed.text, target.compile_flags(), "flow", "test")
    assert WINOGRAD_FILTER_MARK not in flow  # the filter transform was evaluated at compile time
    built = compile_vmfb(changed.text, target.compile_flags(), tmp_path / "winograd.vmfb")
    assert built.ok, built.stderr[-2000:]
    fn, _ = load_function(tmp_path / "winograd.vmfb", "main")
    x = np.random.default_rng(2).standard_normal((1, 28, 28, 8)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(fn(x)), reference(x, w, init), rtol=1e-3, atol=1e-3)

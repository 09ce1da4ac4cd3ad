"""Bugs seen on whole models, reproduced on small dispatches of the same form, with the parameters that showed them.

A wrong answer (a residual block writing a transposed second result) and candidates that passed the checks but
that IREE rejected (a fused pad's vector, a packed implicit GEMM of a padded 1-D convolution). Preconditions (the
dispatch has the form, the candidate is valid, it builds) fail the test outright (`pytest.fail`).
"""

from __future__ import annotations

import numpy as np
import pytest

from ansor_mlir.core.schedule import Candidate, MicroKernel, micro_kernel_shape
from ansor_mlir.core.task import main_task
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.compare import run_once
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.space.annotation import is_valid, sample_candidate
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.tuner import build_input

H, W, C, F = 4, 16, 32, 32


def residual_block(h: int, w: int, c: int, f: int) -> str:
    """A ResNet basic block's second convolution after the channels-last rewrite, as one dispatch: a 3x3
    convolution over an input padded by its producer, scaled, plus the residual, ReLU; written twice, channels-last
    for the next convolution and transposed back to NCHW for a consumer still in NCHW (ResNet-18's stride-2
    shortcut: `main_dispatch_8`, `_15`, `_22` of `examples/models/resnet.py:resnet18`)."""
    pad_h, pad_w = h + 2, w + 2
    return f"""
func.func @block(%x: tensor<{pad_h}x{pad_w}x{c}xf32>, %k: tensor<3x3x{c}x{f}xf32>, %scale: tensor<{f}xf32>,
                 %res: tensor<{h}x{w}x{f}xf32>) -> (tensor<{h}x{w}x{f}xf32>, tensor<{f}x{h}x{w}xf32>) {{
  %zero = arith.constant 0.0 : f32
  %nchw = tensor.empty() : tensor<{f}x{h}x{w}xf32>
  %nhwc = tensor.empty() : tensor<{h}x{w}x{f}xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%nhwc : tensor<{h}x{w}x{f}xf32>) -> tensor<{h}x{w}x{f}xf32>
  %conv = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0 + d3, d1 + d4, d5)>,
                                            affine_map<(d0, d1, d2, d3, d4, d5) -> (d3, d4, d5, d2)>,
                                            affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2)>],
                          iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction",
                                            "reduction"]}}
      ins(%x, %k : tensor<{pad_h}x{pad_w}x{c}xf32>, tensor<3x3x{c}x{f}xf32>) outs(%acc : tensor<{h}x{w}x{f}xf32>) {{
  ^bb0(%in: f32, %kk: f32, %out: f32):
    %m = arith.mulf %in, %kk : f32
    %a = arith.addf %out, %m : f32
    linalg.yield %a : f32
  }} -> tensor<{h}x{w}x{f}xf32>
  %out:2 = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>,
                                             affine_map<(d0, d1, d2) -> (d2)>,
                                             affine_map<(d0, d1, d2) -> (d0, d1, d2)>,
                                             affine_map<(d0, d1, d2) -> (d0, d1, d2)>,
                                             affine_map<(d0, d1, d2) -> (d2, d0, d1)>],
                           iterator_types = ["parallel", "parallel", "parallel"]}}
      ins(%conv, %scale, %res : tensor<{h}x{w}x{f}xf32>, tensor<{f}xf32>, tensor<{h}x{w}x{f}xf32>)
      outs(%nhwc, %nchw : tensor<{h}x{w}x{f}xf32>, tensor<{f}x{h}x{w}xf32>) {{
  ^bb0(%v: f32, %s: f32, %r: f32, %o: f32, %o2: f32):
    %p = arith.mulf %v, %s : f32
    %q = arith.addf %p, %r : f32
    %t = arith.cmpf ugt, %q, %zero : f32
    %y = arith.select %t, %q, %zero : f32
    linalg.yield %y, %y : f32, f32
  }} -> (tensor<{h}x{w}x{f}xf32>, tensor<{f}x{h}x{w}xf32>)
  return %out#0, %out#1 : tensor<{h}x{w}x{f}xf32>, tensor<{f}x{h}x{w}xf32>
}}
"""


@pytest.fixture(scope="module")
def block(target):
    """(task, flow, inputs, the two expected results) of the residual block."""
    text = residual_block(H, W, C, F)
    task = main_task(extract_tasks(text, target, "block"))
    if len(task.output_types) != 2:
        pytest.fail(f"the block is not one dispatch with two results: {task.output_types}")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((H + 2, W + 2, C)).astype(np.float32)
    k = rng.standard_normal((3, 3, C, F)).astype(np.float32)
    scale = rng.uniform(0.5, 1.5, F).astype(np.float32)
    residual = rng.standard_normal((H, W, F)).astype(np.float32)
    conv = sum(np.einsum("hwc,cf->hwf", x[i:i + H, j:j + W], k[i, j]) for i in range(3) for j in range(3))
    y = np.maximum(conv * scale + residual, 0)
    flow = compile_to_phase(text, target.compile_flags(), "flow", "block")
    return task, flow, [x, k, scale, residual], (y, y.transpose(2, 0, 1))


def run_candidate(target, block, rules: tuple[str, ...], values: dict) -> list[np.ndarray]:
    """Build the candidate of the sketch with these rules, run it once; a precondition that does not hold fails."""
    task, flow, inputs, _ = block
    sketch = next((s for s in generate_sketches(task, target) if s.rules == rules), None)
    if sketch is None:
        pytest.fail(f"no sketch {'+'.join(rules)} for the residual block")
    kernel = sketch.step(MicroKernel)
    if kernel is not None:  # the first register shape of at most one output row of pixels
        options = kernel.knobs[0].options
        index = next((i for i, o in enumerate(options) if micro_kernel_shape(o)[0] <= W), None)
        if index is None:
            pytest.fail(f"no micro-kernel shape of at most {W} rows among {options}")
        values = {**values, "micro_kernel": (index,)}
    if not is_valid(sketch, values, task, target):
        pytest.fail(f"{'+'.join(rules)} {values} is not a valid candidate here")
    candidate = Candidate(task.key, sketch.index, tuple(sorted(values.items())))
    (build,) = LocalBuilder(target, workers=1, timeout_s=300).build([build_input(task, sketch, candidate, flow)])
    if not build.ok:
        pytest.fail(f"{'+'.join(rules)} {values} does not build: {build.message}")
    return run_once(build.program.vmfb, "block", inputs)


TRANSPOSED_RESULT_BUG = (  # fixed: kept to say what the tests above guard against
    "transform_strategy folded unit loops via rank-reducing slices (fold_unit_extent_dims_via_slices): the "
    "transposed result's register tile (tensor<16x1x1xN>) becomes tensor<16xN>, and after bufferization its "
    "transfer_write into the 4-D subview keeps the minor-identity map, so the 16 channels land on a unit "
    "dimension, out of bounds: all but the first channel of every register tile is masked off"
)
# Candidates sampled on the models (their ResNet-18 forms gave these wrong answers), scaled to the block.
WRONG = {
    ("td-multi-level-tiling",): {"cache_write": (1,), "consumer_fusion": (0,), "d1": (2, 1), "d2": (8, 1),
                                 "d3": (32, 16), "d6": (16,), "lowering": (0,)},
    ("td-multi-level-tiling-cached",): {"cache_write": (0,), "consumer_fusion": (0,), "d1": (4, 1, 1),
                                        "d2": (8, 1, 1), "d3": (32, 16, 16), "d4": (3,), "d5": (3,), "d6": (1, 1),
                                        "lowering": (0,)},
    ("td-multi-level-tiling-cached", "micro-kernel"): {"consumer_fusion": (0,), "d1": (4, 1), "d2": (16, 16),
                                                       "d3": (32, 32), "d4": (3,), "d5": (3,), "d6": (16, 1)},
}


@pytest.mark.parametrize("rules", list(WRONG), ids=["+".join(r) for r in WRONG])
def test_a_fused_residual_block_writes_both_of_its_results(target, block, rules):
    """Both results are right, the one transposed back to NCHW included (the bug: TRANSPOSED_RESULT_BUG; a
    dispatch writing a permuted result now folds its unit loops through reshapes)."""
    nhwc, nchw = run_candidate(target, block, rules, WRONG[rules])
    if not np.allclose(nhwc, block[3][0], rtol=1e-4, atol=1e-4):
        pytest.fail("the channels-last result is wrong too: another bug than the one this test reproduces")
    np.testing.assert_allclose(nchw, block[3][1], rtol=1e-4, atol=1e-4)


def test_the_decomposed_sketch_writes_both_results(target, block):
    """The sketch that folds no unit loops (it decomposes the window into 1-D convolutions) is right: the block,
    its reference and the bug's scope are what the test above says."""
    values = {"cache_write": (1,), "consumer_fusion": (0,), "d1": (1,), "d2": (8, 2), "d3": (32, 16), "d5": (3,),
              "d6": (16,), "lowering": (0,)}
    nhwc, nchw = run_candidate(target, block, ("td-multi-level-tiling", "decompose"), values)
    np.testing.assert_allclose(nhwc, block[3][0], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(nchw, block[3][1], rtol=1e-4, atol=1e-4)


def padded_window_op(c: int, t: int, f: int, k: int, dilation: int = 1, depthwise: bool = False) -> str:
    """A 1-D convolution (NCW, or depthwise with `depthwise`) over an input it pads itself, plus a residual: a
    speech CNN's layer after `conv1d-pad-fusion` / `pad-fusion`, as the one dispatch region those rewrites make."""
    from ansor_mlir.frontend.dispatch_regions import as_one_dispatch

    halo = dilation * (k - 1) // 2
    if depthwise:
        x, y, w = f"1x{c}x{t}x1xf32", f"1x{c}x{t}x1xf32", f"{c}x{k}x1xf32"
        padded, pads = f"1x{c}x{t + 2 * halo}x1xf32", (f"[0, 0, {halo}, 0]", 4)
        op = (f"linalg.depthwise_conv_2d_nchw_chw {{dilations = dense<[{dilation}, 1]> : vector<2xi64>, "
              "strides = dense<1> : vector<2xi64>}")
        maps = ", ".join(["affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>"] * 3)
        iterators = ", ".join(['"parallel"'] * 4)
    else:
        x, y, w = f"1x{c}x{t}xf32", f"1x{f}x{t}xf32", f"{f}x{c}x{k}xf32"
        padded, pads = f"1x{c}x{t + 2 * halo}xf32", (f"[0, 0, {halo}]", 3)
        op = (f"linalg.conv_1d_ncw_fcw {{dilations = dense<{dilation}> : vector<1xi64>, "
              "strides = dense<1> : vector<1xi64>}")
        maps = ", ".join(["affine_map<(d0, d1, d2) -> (d0, d1, d2)>"] * 3)
        iterators = ", ".join(['"parallel"'] * 3)
    indices = ", ".join(f"%i{n}: index" for n in range(pads[1]))
    text = f"""
func.func @conv(%x: tensor<{x}>, %w: tensor<{w}>, %res: tensor<{y}>) -> tensor<{y}> {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{y}>
  %p = tensor.pad %x low{pads[0]} high{pads[0]} {{
  ^bb0({indices}):
    tensor.yield %zero : f32
  }} : tensor<{x}> to tensor<{padded}>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<{y}>) -> tensor<{y}>
  %c = {op} ins(%p, %w : tensor<{padded}>, tensor<{w}>) outs(%acc : tensor<{y}>) -> tensor<{y}>
  %out = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{iterators}]}}
      ins(%c, %res : tensor<{y}>, tensor<{y}>) outs(%e : tensor<{y}>) {{
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }} -> tensor<{y}>
  return %out : tensor<{y}>
}}
"""
    return as_one_dispatch(text, "conv")


def sampled_builds(target, text: str, wanted, seeds: range = range(3)) -> list[tuple[str, str]]:
    """Candidates the checks pass, sampled from each sketch `wanted(sketch)` selects, that do not build: (sketch
    name, error). A sketch the rules no longer derive contributes nothing: rejected before compiling is right."""
    import random

    task = main_task(extract_tasks(text, target, "conv"))
    if not task.pads_input:
        pytest.fail("the task does not pad its input itself")
    flow = compile_to_phase(text, target.compile_flags(), "flow", "conv")
    items, names = [], []
    for sketch in generate_sketches(task, target):
        if not wanted(sketch):
            continue
        for seed in seeds:
            candidate = sample_candidate(sketch, task, target, random.Random(seed))
            if candidate is not None:
                items.append(build_input(task, sketch, candidate, flow))
                names.append("+".join(sketch.rules))
    builds = LocalBuilder(target, workers=2, timeout_s=300).build(items)
    return [(name, build.message) for name, build in zip(names, builds, strict=True) if not build.ok]


def test_implicit_gemm_candidates_of_a_1d_convolution_that_pads_its_input_build(target):
    """Implicit GEMM + packing of a 1-D convolution whose dispatch pads its input passed the checks and crashed
    iree-compile (8 of 8 on a speech CNN's layers); the rule no longer derives it, and what it derives builds."""
    text = padded_window_op(80, 200, 256, 5)
    task = main_task(extract_tasks(text, target, "conv"))
    assert not any({"implicit-gemm", "packing"} <= set(s.rules) for s in generate_sketches(task, target))
    assert sampled_builds(target, text, lambda s: "implicit-gemm" in s.rules) == []


def test_pipeline_candidates_of_a_dilated_depthwise_1d_convolution_fit_the_vector_limit(target):
    """IREE's pipeline vectorizes a fused pad over the workgroup's input tile: a 50-step tile of 256 channels made
    a `vector<256x58xf32>` and IREE rejected it ('large vector sizes'); the checks now bound that tile."""
    text = padded_window_op(256, 200, 256, 3, dilation=4, depthwise=True)
    task = main_task(extract_tasks(text, target, "conv"))
    sketch = next(s for s in generate_sketches(task, target) if s.rules == ("multi-level-tiling",))
    values = {"d0": (1, 1), "d1": (50, 1), "d2": (1, 1), "d3": (256, 256), "d4": (3,), "d5": (1,)}
    assert not is_valid(sketch, values, task, target)
    assert sampled_builds(target, text, lambda s: s.rules == ("multi-level-tiling",)) == []

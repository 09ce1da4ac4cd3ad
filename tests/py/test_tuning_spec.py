"""An emitted tuning spec alone builds the tuned program, whichever sketch family won.

The logs are written by hand from candidate records, so the tests do not
depend on which family a short tuning run happens to pick: pipeline winners
(`compilation_info` on the root), transform winners (the strategy travels in
the spec and runs on its dispatch) and one of each in one spec. Each spec is
compiled with nothing but the target's flags and
`--iree-codegen-tuning-spec-path`, run, and checked against numpy; IREE's
configurations show that each winner applied.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import numpy as np
import pytest

from ansor_mlir import api
from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.schedule import Family
from ansor_mlir.database.records import Record, append_records
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.compare import run_once
from ansor_mlir.mlir.iree_compiler import run_tool, tuning_spec_flags
from ansor_mlir.space.annotation import sample_candidate
from ansor_mlir.space.resolve import render_config
from ansor_mlir.space.sketch_rules import generate_sketches

# Two dispatches: relu(a @ b + bias), then that @ c.
TWO_MATMULS = """
func.func @two(%a: tensor<32x64xf32>, %b: tensor<64x48xf32>, %bias: tensor<48xf32>, %c: tensor<48x32xf32>)
    -> tensor<32x32xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x48xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<32x48xf32>) -> tensor<32x48xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<32x64xf32>, tensor<64x48xf32>) outs(%f : tensor<32x48xf32>)
      -> tensor<32x48xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bias : tensor<32x48xf32>, tensor<48xf32>) outs(%e : tensor<32x48xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %s = arith.addf %x, %y : f32
      %z = arith.maximumf %s, %cst : f32
      linalg.yield %z : f32
  } -> tensor<32x48xf32>
  %e2 = tensor.empty() : tensor<32x32xf32>
  %f2 = linalg.fill ins(%cst : f32) outs(%e2 : tensor<32x32xf32>) -> tensor<32x32xf32>
  %out = linalg.matmul ins(%r, %c : tensor<32x48xf32>, tensor<48x32xf32>) outs(%f2 : tensor<32x32xf32>)
      -> tensor<32x32xf32>
  return %out : tensor<32x32xf32>
}
"""
SEED = 1


def winner(task, target, family: Family, rng: random.Random) -> Record:
    """A measured-looking record of a random candidate of a non-default sketch of `family`."""
    sketch = rng.choice([s for s in generate_sketches(task, target) if s.family is family and s.knobs])
    candidate = sample_candidate(sketch, task, target, rng)
    assert candidate is not None
    return Record(target.key, task.key, task.name, candidate, sketch, render_config(sketch, candidate, task),
                  task.root_index, MeasureResult(ErrorKind.NONE, median_s=1e-6, repeats=5), time.time(),
                  fingerprint=target.fingerprint)


def reference(a, b, bias, c) -> np.ndarray:
    return np.maximum(a @ b + bias, 0) @ c


@pytest.mark.parametrize("families", [
    (Family.PIPELINE, Family.PIPELINE), (Family.TRANSFORM, Family.TRANSFORM), (Family.TRANSFORM, Family.PIPELINE),
], ids=["pipeline", "transform", "mixed"])
def test_emitted_spec_alone_builds_the_tuned_program(tmp_path: Path, target, families):
    tasks = extract_tasks(TWO_MATMULS, target, "two")
    assert len(tasks) == 2
    rng = random.Random(SEED)
    winners = [winner(task, target, family, rng) for task, family in zip(tasks, families, strict=True)]
    log = tmp_path / "log.jsonl"
    append_records(log, winners)
    spec = tmp_path / "spec.mlir"
    spec.write_text(api.emit_tuning_spec(TWO_MATMULS, log, target))
    source = tmp_path / "two.mlir"
    source.write_text(TWO_MATMULS)
    flags = [str(source), *target.compile_flags(), *tuning_spec_flags(spec)]

    configured = run_tool("iree-compile", [*flags, "--compile-to=executable-configurations"])
    assert configured.ok, configured.stderr[-2000:]
    text = configured.stdout.decode()
    # A transform winner's dispatch names its strategy and carries it (the spec copied it into the dispatch's
    # module, where IREE runs it when it lowers the dispatch); a pipeline winner's tiles are the configuration
    # IREE lowers with.
    assert ("codegen_spec = @ansor_strategy_" in text) == (Family.TRANSFORM in families)
    assert ("module @ansor_strategy_" in text) == (Family.TRANSFORM in families)
    for record in winners:
        if record.family is Family.PIPELINE:
            for level, sizes in record.config.levels:
                assert f"{level} = [{', '.join(map(str, sizes))}]" in text, (level, sizes)

    built = tmp_path / "spec.vmfb"
    result = run_tool("iree-compile", [*flags, "-o", str(built)])
    assert result.ok, result.stderr[-2000:]
    data = np.random.default_rng(0)
    inputs = [data.uniform(-1, 1, s).astype(np.float32) for s in ((32, 64), (64, 48), (48,), (48, 32))]
    (got,) = run_once(built.read_bytes(), "two", inputs)
    np.testing.assert_allclose(got, reference(*inputs), rtol=1e-4, atol=1e-4)


# A batchless depthwise convolution (MobileNetV2's, as IREE's ONNX import leaves it), channels first.
DEPTHWISE = """
func.func @dw(%x: tensor<16x10x10xf32>, %w: tensor<16x3x3xf32>) -> tensor<16x8x8xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x8x8xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<16x8x8xf32>) -> tensor<16x8x8xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(h, w, c, kh, kw) -> (c, h + kh, w + kw)>,
                                        affine_map<(h, w, c, kh, kw) -> (c, kh, kw)>,
                                        affine_map<(h, w, c, kh, kw) -> (c, h, w)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %w : tensor<16x10x10xf32>, tensor<16x3x3xf32>) outs(%f : tensor<16x8x8xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
  } -> tensor<16x8x8xf32>
  return %y : tensor<16x8x8xf32>
}
"""


def test_a_strategy_for_a_batchless_convolution_builds_from_the_spec(tmp_path: Path, target):
    """IREE inserts a unit batch dimension into a batchless convolution after the spec's entry point runs, and the
    strategy is written for that form: run from the entry point it crashed IREE (MobileNetV2's depthwise
    convolutions); carried into the dispatch, it runs where IREE lowers the dispatch, as it ran when measured."""
    (task,) = extract_tasks(DEPTHWISE, target, "dw")
    assert task.default_config is None and task.tunable  # only strategies configure it
    log = tmp_path / "log.jsonl"
    append_records(log, [winner(task, target, Family.TRANSFORM, random.Random(SEED))])
    spec = tmp_path / "spec.mlir"
    spec.write_text(api.emit_tuning_spec(DEPTHWISE, log, target))
    source = tmp_path / "dw.mlir"
    source.write_text(DEPTHWISE)
    built = tmp_path / "dw.vmfb"
    result = run_tool("iree-compile", [str(source), *target.compile_flags(), *tuning_spec_flags(spec),
                                       "-o", str(built)])
    assert result.ok, result.stderr[-2000:]
    data = np.random.default_rng(0)
    x, w = data.uniform(-1, 1, (16, 10, 10)).astype(np.float32), data.uniform(-1, 1, (16, 3, 3)).astype(np.float32)
    (got,) = run_once(built.read_bytes(), "dw", [x, w])
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(1, 2))
    np.testing.assert_allclose(got, np.einsum("chwij,cij->chw", windows, w), rtol=1e-4, atol=1e-4)

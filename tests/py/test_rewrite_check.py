"""A rewritten, tuned program is kept only if IREE's default of the program as given does not beat it."""

from __future__ import annotations

import pytest

from ansor_mlir import api
from ansor_mlir.core.target import Target, detect_host
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.measure.local_runner import LocalRunner
from ansor_mlir.tuning.rewrite_check import check_rewrites, decide, majority
from ansor_mlir.tuning.verification import UserProgram

N = 192
MATMUL = f"""func.func @mm(%a: tensor<{N}x{N}xf32>, %b: tensor<{N}x{N}xf32>) -> tensor<{N}x{N}xf32> {{
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{N}x{N}xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<{N}x{N}xf32>) -> tensor<{N}x{N}xf32>
  %c = linalg.matmul ins(%a, %b : tensor<{N}x{N}xf32>, tensor<{N}x{N}xf32>) outs(%f : tensor<{N}x{N}xf32>)
    -> tensor<{N}x{N}xf32>
  return %c : tensor<{N}x{N}xf32>
}}
"""
# The same function, slower: a second matmul with `b - b` (never folded for floats) adds an exact zero.
SLOWER = MATMUL.replace("  return %c", f"""  %z = arith.subf %b, %b : tensor<{N}x{N}xf32>
  %d = linalg.matmul ins(%a, %z : tensor<{N}x{N}xf32>, tensor<{N}x{N}xf32>) outs(%f : tensor<{N}x{N}xf32>)
    -> tensor<{N}x{N}xf32>
  %s = arith.addf %c, %d : tensor<{N}x{N}xf32>
  return %s""").replace("return %c", "return %s")


@pytest.fixture(scope="module")
def target() -> Target:
    return resolve_target(detect_host())


def run_check(target: Target, rewritten: str, spec: str | None = None):
    builder, runner = LocalBuilder(target), LocalRunner(target)
    try:
        return check_rewrites(builder, runner, UserProgram(MATMUL, "mm"), UserProgram(rewritten, "mm"), spec)
    finally:
        builder.close()
        runner.close()


def test_the_decision_needs_the_program_as_given_to_win_beyond_the_noise():
    assert not decide((1.0,) * 8, (1.5,) * 8).kept
    assert decide((1.5,) * 8, (1.0,) * 8).kept
    assert decide((1.0, 1.01, 0.99, 1.0), (1.0, 0.99, 1.01, 1.0)).kept  # a tie keeps the rewrites
    assert decide((1.0, 1.0, 1.0, 2.0), (1.5, 1.5, 1.5, 1.0)).kept  # one round in four cannot carry it


def test_one_comparison_of_three_cannot_drop_the_rewrites():
    """A slow phase of the host in one comparison is outvoted by the two outside it."""
    lost, won = decide((1.0,) * 8, (1.5,) * 8), decide((1.5,) * 8, (1.0,) * 8)
    assert majority([lost, won, won]) is won
    assert majority([lost, won, lost]) is lost


@pytest.mark.timing
def test_a_slower_rewritten_program_is_dropped(target: Target):
    """Real builds, timed alternately: twice the work loses to the program as given, and the note says so."""
    slower = run_check(target, SLOWER)
    assert slower.check is not None and not slower.kept, slower
    assert "lost to IREE's default of the program as given" in slower.note("mm", "pad-fusion")
    same = run_check(target, MATMUL)
    assert same.check is not None and same.kept, same


def test_a_tuned_program_that_does_not_build_is_dropped(target: Target):
    """The program as given builds: a rewritten program whose tuning spec IREE rejects is never the result."""
    broken = run_check(target, SLOWER, spec="this is not a tuning spec")
    assert not broken.kept and broken.check is None, broken
    assert "did not build" in broken.reason
    assert "the tuned module is the program as given" in broken.note("mm", "conv1d-pad-fusion")


def test_tune_reports_the_check_only_when_a_rewrite_applied(tmp_path):
    """No rewrite applies to a matmul: nothing to check, the tuned module is the log's best as usual."""
    result = api.tune(MATMUL, "llvm-cpu", trials=2, log=tmp_path / "l.jsonl", progress=False, name="mm")
    assert result.rewrite_check is None and "mm" in result.module

"""Whole-program verification: what the log measured must hold in the user's program, or IREE's default is used."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

import ansor_mlir
from ansor_mlir import api
from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.schedule import Candidate, Family
from ansor_mlir.core.task import main_task
from ansor_mlir.database.records import ProgramCheck, Record, append_records, best_records, now, read_records
from ansor_mlir.frontend.entry_point import entry_point
from ansor_mlir.frontend.model_source import load_model
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.builder import BuiltProgram
from ansor_mlir.measure.inputs import encode_array, make_arrays
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.measure.local_runner import LocalRunner
from ansor_mlir.measure.runner import CompareResult, RunInput
from ansor_mlir.space.annotation import sample_candidate
from ansor_mlir.space.resolve import render_config
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.task_result import TaskResult
from ansor_mlir.tuning.verification import (
    ProgramVerifier,
    build_gap,
    expected_saving,
    inconclusive,
    judge,
    judged,
    sign_test_p,
    summarize,
    whole_program_note,
)


def test_judge_accepts_only_wins_beyond_the_noise():
    assert judge([2.0] * 9, [1.0] * 9).accepted
    tie = judge([1.00, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97], [1.0] * 7)
    assert not tie.accepted and "noise" in tie.reason
    assert not judge([1.0] * 9, [1.5] * 9).accepted
    # One lucky round does not carry a candidate that lost the others.
    assert not judge([3.0, 1.0, 1.0, 1.0, 1.0], [1.0, 1.1, 1.1, 1.1, 1.1]).accepted
    # A real 9% gain that a noisy host hides in 9 rounds of 30: the lower quartile is below 1, but 21 wins of
    # 30 are beyond a tie's chance (a sign test); the same share of 15 rounds is not.
    noisy = [1.09] * 21 + [0.95] * 9
    check = judge(noisy, [1.0] * 30)
    assert check.ratio_low < 1.0 and check.accepted
    assert not judge(noisy[:10] + noisy[-5:], [1.0] * 15).accepted
    assert sign_test_p(15, 15) == 0.5**15 and sign_test_p(0, 15) == 1.0


def _record(target, task, sketch, candidate, median_s: float) -> Record:
    return Record(target.key, task.key, task.name, candidate, sketch, render_config(sketch, candidate, task),
                  task.root_index, MeasureResult(ErrorKind.NONE, median_s=median_s, spread_s=0.0), now(),
                  fingerprint=target.fingerprint)


@pytest.mark.timing
def test_a_candidate_that_wins_alone_and_loses_in_the_program_is_rejected(small_mm, target, tmp_path: Path):
    """A deliberately slow configuration (1-element register tiles), logged as if it had won its task by 1000x:
    the whole program, timed against IREE's default build, shows it slower, so the default is applied."""
    task = extract_tasks(small_mm, target, "mm")[0]
    sketches = generate_sketches(task, target)
    sketch = next(s for s in sketches if s.family is Family.PIPELINE and s.knobs and "cache" not in "".join(s.levels))
    values = tuple(sorted((k.name, tuple(1 for _ in k.levels)) for k in sketch.knobs))
    slow = Candidate(task.key, sketch.index, values)
    default = _record(target, task, sketches[0], Candidate(task.key, 0, ()), 1e-3)
    lucky = _record(target, task, sketch, slow, 1e-6)
    log = tmp_path / "log.jsonl"
    append_records(log, [default, lucky])
    assert best_records(read_records(log), target.key, target.fingerprint)[task.key].candidate == slow  # log alone

    result = TaskResult(task=task)
    with LocalBuilder(target) as builder, LocalRunner(target) as runner:
        verifier = ProgramVerifier(target, builder, runner, count=2, rounds=7)
        checks = verifier.verify(small_mm, "mm", [result], read_records(log)).checks
    assert len(checks) == 1 and not checks[0].program.accepted
    assert checks[0].program.tuned_s > checks[0].program.default_s
    append_records(log, checks)
    records = read_records(log)
    chosen = best_records(records, target.key, target.fingerprint)[task.key]
    assert chosen.is_default
    summarize([result], records, target)
    assert result.fell_back and result.program_speedup is None
    # A 1000x task win that loses the program by far is no noise: the user hears the builds differ.
    assert "difference between the two builds" in build_gap(result, records, target)
    near = [replace(r, program=replace(r.program, ratio=0.97)) if r.program else r for r in records]
    assert build_gap(result, near, target) is None
    tuned = api.apply_best(small_mm, log, target, "mm")
    assert "lowering_config" not in tuned and "compilation_info" not in tuned
    with pytest.warns(UserWarning, match="configures nothing"):
        api.emit_tuning_spec(small_mm, log, target, "mm")

    # Resuming checks nothing twice.
    with LocalBuilder(target) as builder, LocalRunner(target) as runner:
        assert ProgramVerifier(target, builder, runner, count=2, rounds=7).verify(small_mm, "mm", [result],
                                                                                  records).checks == []


def test_tuning_reports_the_program_speedup_beside_the_log(small_mm, target, tmp_path: Path):
    log = tmp_path / "log.jsonl"
    result = api.tune(small_mm, target=target, trials=5, log=log, progress=False, name="mm")
    records = read_records(log)
    checks = [r for r in records if r.program is not None]
    (task,) = result.tasks
    # Every candidate faster than IREE's default as a task (at most verify=2) is checked in the program.
    default = min(r.result.median_s for r in records if r.program is None and r.is_default)
    faster = {r.candidate.identity for r in records if r.program is None and r.ok and not r.is_default
              and r.result.median_s < default}
    assert task.verified == len(checks) == min(2, len(faster))
    if task.fell_back or not checks:
        assert task.program_speedup is None
    else:
        assert task.program_speedup == max(c.program.ratio for c in checks if c.program.accepted)


def _timed(target, program: BuiltProgram, inputs: tuple[bytes, ...]) -> float:
    with LocalRunner(target) as runner:
        run = runner.submit(RunInput(program, inputs)).result()
    assert run.measured.ok, run.measured.message
    return run.measured.median_s


@pytest.mark.timing
def test_a_model_with_external_weights_is_checked_as_compile_builds_it(target):
    """The program is the model's source built by IREE with a one-entry tuning spec, its weights served at run
    time (`ansor_mlir.compile`'s build, not a flow-level module that transforms the weights on every call): a
    deliberately slow configuration is rejected with real timings on both sides, and IREE's default build runs
    about as fast as the compiled model."""
    from onnx_models import mlp_onnx

    source = load_model(mlp_onnx(features=256, hidden=256))
    assert source.parameters
    task = main_task(extract_tasks(source.text, target, source.name))
    sketches = generate_sketches(task, target)
    sketch = next(s for s in sketches if s.family is Family.PIPELINE and s.knobs and "cache" not in "".join(s.levels))
    slow = Candidate(task.key, sketch.index, tuple(sorted((k.name, tuple(1 for _ in k.levels)) for k in sketch.knobs)))
    with LocalBuilder(target) as builder, LocalRunner(target) as runner:
        verifier = ProgramVerifier(target, builder, runner, count=2, rounds=7, parameters=source.parameters,
                                   parameter_scope=source.scope)
        (check,) = verifier.verify(source.text, source.name, [TaskResult(task=task)],
                                   [_record(target, task, sketch, slow, 1e-9)]).checks
    verdict = check.program
    assert verdict.rounds == 7 and 0 < verdict.default_s < verdict.tuned_s and not verdict.accepted, verdict

    entry = entry_point(source.text, source.name)
    inputs = tuple(encode_array(a) for a in make_arrays(entry.input_types, "inputs"))
    compiled = ansor_mlir.compile(source, target)
    assert verdict.default_s < 3 * _timed(target, BuiltProgram(compiled.vmfb, compiled.function), inputs)


def test_a_strategy_builds_in_the_model_and_an_unmatchable_root_is_a_failed_check(target):
    """A transform winner for a batchless convolution travels in its spec into the model's build and gets a
    verdict; a root whose body uses a constant of its function (a fused ReLU's zero) cannot be matched by a
    tuning spec, and its check records why, with no rounds, instead of stopping the run."""
    from onnx_models import cnn_onnx

    source = load_model(cnn_onnx(channels=16, size=16))
    tasks = extract_tasks(source.text, target, source.name)
    conv = main_task(tasks)
    pool = next(t for t in tasks if t is not conv)
    strategy_sketch = next(s for s in generate_sketches(conv, target) if s.family is Family.TRANSFORM)
    strategy = sample_candidate(strategy_sketch, conv, target, random.Random(0))
    pool_sketches = generate_sketches(pool, target)
    records = [_record(target, conv, strategy_sketch, strategy, 1e-9),
               _record(target, pool, pool_sketches[1], sample_candidate(pool_sketches[1], pool, target,
                                                                         random.Random(0)), 1e-9)]
    with LocalBuilder(target) as builder, LocalRunner(target) as runner:
        verifier = ProgramVerifier(target, builder, runner, count=2, rounds=5, parameters=source.parameters,
                                   parameter_scope=source.scope)
        checks = verifier.verify(source.text, source.name, [TaskResult(task=conv), TaskResult(task=pool)],
                                 records).checks
    by_task = {c.task_key: c.program for c in checks}
    # 5 rounds, or 10 where the noise left a promising verdict open (`inconclusive`) and it was timed again
    assert by_task[conv.key].rounds in (5, 10) and by_task[conv.key].default_s > 0 and by_task[conv.key].tuned_s > 0
    assert by_task[pool.key].rounds == 0 and "cannot match its root op" in by_task[pool.key].reason


def test_only_a_promising_check_the_noise_may_have_decided_earns_more_rounds():
    # C2D at 2 threads on the Zen 3 guest: median 1.17x, lower quartile 0.71: inconclusive.
    assert inconclusive(ProgramCheck(2.2e-3, 2.5e-3, 0.71, 1.17, 1.32, 15, False, "noise"))
    assert not inconclusive(ProgramCheck(2.2e-3, 1.1e-3, 1.9, 2.0, 2.1, 15, True))  # accepted already
    assert not inconclusive(ProgramCheck(1e-3, 1e-3, 0.9, 0.99, 1.1, 15, False, "noise"))  # a tie or a loss
    assert not inconclusive(ProgramCheck(0.0, 0.0, 0.0, 0.0, 0.0, 0, False, "did not build"))


def test_an_inconclusive_check_is_judged_again_on_the_rounds_of_both_comparisons():
    # Program 1 wins most rounds but loses a quarter of them to the host's phases; program 2 plainly loses.
    first = CompareResult(((2.0,) * 8, (1.0,) * 5 + (3.0,) * 3, (3.0,) * 8))
    asked: list[list[int]] = []

    def again(indices: list[int]) -> CompareResult:
        asked.append(indices)
        return CompareResult(((2.0,) * 8, (1.0,) * 8))

    one, two = judged(first, 2, again)
    assert asked == [[1]]  # only the inconclusive candidate is timed again
    assert one.accepted and one.rounds == 16 and not two.accepted and two.rounds == 8
    # A failed second comparison leaves the first verdict.
    (kept,) = judged(CompareResult(first.samples[:2]), 1, lambda _: CompareResult(error=ErrorKind.RUNTIME_ERROR))
    assert not kept.accepted and kept.rounds == 8


TWO_MATMULS = """
func.func @two(%a: tensor<64x128xf32>, %b: tensor<128x96xf32>, %c: tensor<96x32xf32>) -> tensor<64x32xf32> {
  %cst = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<64x96xf32>
  %f1 = linalg.fill ins(%cst : f32) outs(%e1 : tensor<64x96xf32>) -> tensor<64x96xf32>
  %m1 = linalg.matmul ins(%a, %b : tensor<64x128xf32>, tensor<128x96xf32>)
      outs(%f1 : tensor<64x96xf32>) -> tensor<64x96xf32>
  %e2 = tensor.empty() : tensor<64x32xf32>
  %f2 = linalg.fill ins(%cst : f32) outs(%e2 : tensor<64x32xf32>) -> tensor<64x32xf32>
  %m2 = linalg.matmul ins(%m1, %c : tensor<64x96xf32>, tensor<96x32xf32>)
      outs(%f2 : tensor<64x32xf32>) -> tensor<64x32xf32>
  return %m2 : tensor<64x32xf32>
}
"""


def _accepted(record: Record) -> Record:
    return replace(record, program=ProgramCheck(1e-3, 5e-4, 1.9, 2.0, 2.1, 5, True))


def test_a_task_is_checked_against_the_program_with_the_other_tasks_choices(target):
    """A resumed run's accepted choice for one matmul is in the baseline the other matmul's candidate is timed
    against (`others`), and the whole tuned program, both choices in, is timed against IREE's default build."""
    first, second = extract_tasks(TWO_MATMULS, target, "two")
    sketches = {}
    for task in (first, second):
        sketches[task.key] = next(s for s in generate_sketches(task, target)
                                  if s.family is Family.PIPELINE and s.knobs and "cache" not in "".join(s.levels))
    defaults = [_record(target, t, generate_sketches(t, target)[0], Candidate(t.key, 0, ()), 1e-3)
                for t in (first, second)]
    won = _accepted(_record(target, first, sketches[first.key],
                            sample_candidate(sketches[first.key], first, target, random.Random(0)), 5e-4))
    # The second matmul holds an accepted check of its own, so two tasks apply a checked candidate whatever the
    # verdict on the unchecked one.
    kept, fresh = (sample_candidate(sketches[second.key], second, target, random.Random(seed)) for seed in (0, 1))
    assert kept.identity != fresh.identity
    earlier = _accepted(_record(target, second, sketches[second.key], kept, 6e-4))
    candidate = _record(target, second, sketches[second.key], fresh, 5e-4)
    results = [TaskResult(task=first), TaskResult(task=second)]
    with LocalBuilder(target) as builder, LocalRunner(target) as runner:
        verifier = ProgramVerifier(target, builder, runner, count=1, rounds=5)
        verification = verifier.verify(TWO_MATMULS, "two", results, [*defaults, won, earlier, candidate])
    (check,) = verification.checks
    assert check.task_key == second.key and check.candidate == fresh and check.program.others == 1
    assert check.program.rounds >= 5 and check.program.default_s > 0 and check.program.tuned_s > 0
    whole = verification.whole
    assert whole is not None and whole.others == 2 and whole.rounds >= 5 and whole.ratio > 0
    assert "2 tasks tuned" in whole_program_note(whole)


def test_the_task_that_promises_to_save_the_most_is_checked_first(target):
    first, second = extract_tasks(TWO_MATMULS, target, "two")
    one, two = (generate_sketches(t, target)[0] for t in (first, second))
    records = [_record(target, first, one, Candidate(first.key, 0, ()), 1e-3),
               _record(target, second, two, Candidate(second.key, 0, ()), 4e-3)]
    fast = [_record(target, first, one, Candidate(first.key, 1, ()), 1e-4)]
    slow = [_record(target, second, two, Candidate(second.key, 1, ()), 2e-3)]
    assert expected_saving(second, slow, records, target) == pytest.approx(2e-3)
    assert expected_saving(first.with_weight(3), fast, records, target) == pytest.approx(2.7e-3)
    assert expected_saving(first, fast, [], target) == 0.0  # no default measured: nothing known


class _Comparisons(LocalRunner):
    """A local runner that keeps how many programs each alternated comparison timed."""

    def __init__(self, target) -> None:
        super().__init__(target)
        self.sizes: list[int] = []

    def submit_compare(self, item):
        self.sizes.append(len(item.programs))
        return super().submit_compare(item)


def test_tasks_too_small_to_judge_alone_are_judged_together(target):
    """Two tasks whose candidates each promise 1% of IREE's default (under the noise) are built into one
    program and timed against the program without them: one verdict for both, or, when it loses, one for
    each half; a candidate slower than IREE's default as a task is not checked at all."""
    first, second = extract_tasks(TWO_MATMULS, target, "two")
    sketches = {t.key: next(s for s in generate_sketches(t, target) if s.family is Family.PIPELINE and s.knobs)
                for t in (first, second)}
    defaults = [_record(target, t, generate_sketches(t, target)[0], Candidate(t.key, 0, ()), 1e-3)
                for t in (first, second)]
    picks = [_record(target, t, sketches[t.key], sample_candidate(sketches[t.key], t, target, random.Random(0)),
                     0.99e-3) for t in (first, second)]
    results = [TaskResult(task=first), TaskResult(task=second)]
    with LocalBuilder(target) as builder, _Comparisons(target) as runner:
        checks = ProgramVerifier(target, builder, runner, count=2, rounds=5).verify(
            TWO_MATMULS, "two", results, [*defaults, *picks]).checks
    assert sorted(c.task_key for c in checks) == sorted((first.key, second.key))
    assert runner.sizes[0] == 2  # the program with both candidates against the one with neither
    one, two = (c.program for c in checks)
    if one.together == 2:
        assert one == two and one.rounds >= 5
    else:  # it lost: each half (one task) judged on its own against the same baseline
        assert len(runner.sizes) >= 3 and set(runner.sizes) == {2} and one.together == two.together == 1
    assert "together" not in replace(one, together=1).to_dict()
    assert ProgramCheck.from_dict(replace(one, together=2).to_dict()).together == 2

    slower = [_record(target, t, sketches[t.key], p.candidate, 2e-3) for t, p in zip((first, second), picks,
                                                                                     strict=True)]
    with LocalBuilder(target) as builder, LocalRunner(target) as runner:
        verification = ProgramVerifier(target, builder, runner).verify(TWO_MATMULS, "two", results,
                                                                       [*defaults, *slower])
    assert verification.checks == [] and verification.whole is None

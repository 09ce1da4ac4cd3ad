"""Anchored times: a batch's candidates timed alternately with a fixed anchor, their times read as ratios to it."""

from __future__ import annotations

import json

import pytest

from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.measure.builder import BuiltProgram
from ansor_mlir.measure.local_runner import LocalRunner
from ansor_mlir.measure.runner import Runner
from ansor_mlir.tuning.anchor import (
    MAX_ANCHOR_S,
    MAX_ROUNDS,
    MAX_SPAN,
    MIN_ROUNDS,
    PROGRAM_S,
    Anchor,
    anchored,
    anchored_times,
    rebased,
    rounds_for,
    usable,
)


def timed(median_s: float, spread_s: float = 0.0) -> MeasureResult:
    return MeasureResult(ErrorKind.NONE, median_s=median_s, spread_s=spread_s)


def test_a_candidate_is_read_as_its_median_ratio_to_the_anchor_in_the_same_rounds():
    """The device slows down from round to round; the per-round ratios do not: a candidate at 0.8x the
    anchor's time in every round gets 0.8x the anchor's recorded 2 ms, whatever the rounds' speed."""
    anchor_rounds = (2.0e-3, 3.0e-3, 4.0e-3)
    samples = (anchor_rounds, tuple(0.8 * t for t in anchor_rounds), (2.2e-3, 6.0e-3, 4.4e-3))
    now, times = anchored_times(2e-3, samples)
    assert now == 3.0e-3
    assert times[0] == pytest.approx(1.6e-3)
    assert times[1] == pytest.approx(2e-3 * 1.1)  # per-round ratios 1.1, 2.0, 1.1: a disturbed round is outvoted


def test_anchored_results_keep_the_time_as_measured_and_failures_stay_as_they_are():
    result = anchored(timed(5e-3, 1e-3), 4e-3, 6e-3)
    assert result.median_s == 4e-3 and result.spread_s == pytest.approx(0.8e-3)
    assert result.measured_s == 5e-3 and result.reference_s == 6e-3
    failed = MeasureResult(ErrorKind.RUNTIME_ERROR, message="boom")
    assert anchored(failed, 4e-3, 6e-3) == failed
    assert anchored(timed(1e-3), None, None) == timed(1e-3)


def test_anchored_times_round_trip_through_the_log_and_old_records_read_as_measured():
    from ansor_mlir.database.records import result_from_dict

    result = anchored(timed(3e-3), 2.4e-3, 3.75e-3)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["measured_s"] == 3e-3 and data["reference_s"] == 3.75e-3
    assert result_from_dict(data) == result
    old = {k: v for k, v in data.items() if k not in ("measured_s", "reference_s")}
    assert result_from_dict(old).measured_s is None and result_from_dict(old).reference_s is None


def test_a_fast_anchor_gets_many_short_rounds_and_a_slow_one_a_few_long_ones():
    """Each program's time per batch stays `PROGRAM_S`; short rounds keep most of them inside one host phase."""
    assert rounds_for(300e-6) == (MAX_ROUNDS, pytest.approx(PROGRAM_S / MAX_ROUNDS))
    rounds, round_s = rounds_for(0.02)
    assert MIN_ROUNDS < rounds < MAX_ROUNDS and rounds * round_s == pytest.approx(PROGRAM_S) and round_s >= 0.02
    assert rounds_for(MAX_ANCHOR_S) == (MIN_ROUNDS, pytest.approx(PROGRAM_S / MIN_ROUNDS))


def test_only_fast_programs_anchor_and_only_one_device_runners_time_them():
    assert usable(1e-3) and usable(MAX_ANCHOR_S) and not usable(10 * MAX_ANCHOR_S) and not usable(None)
    assert LocalRunner.times_one_device and not Runner.times_one_device


def test_a_real_tune_records_each_candidate_anchored_to_iree_default(tmp_path):
    """Real IREE: every correct candidate's record has its anchored time, the time it measured alone and the
    anchor's time in the same rounds; IREE's default (the anchor) keeps its own measurement."""
    from conftest import matmul_bias_relu

    from ansor_mlir.api import tune
    from ansor_mlir.database.records import read_records

    log = tmp_path / "log.jsonl"
    tune(matmul_bias_relu(64, 64, 64), "llvm-cpu", trials=10, log=log, progress=False, rewrites="none")
    records = [r for r in read_records(log) if r.ok and r.program is None]
    default = [r for r in records if r.is_default]
    candidates = [r for r in records if not r.is_default]
    assert default and default[0].result.reference_s is None
    assert candidates and all(r.result.reference_s and r.result.measured_s for r in candidates)


def test_a_program_far_faster_than_the_anchor_anchors_the_next_batches():
    """IREE's default of a large convolution, 20-40x slower than the candidates, swung with other limits than
    theirs; the batch's fastest program takes over once the anchor is `MAX_SPAN` times slower, keeping its
    anchored time (the first anchor's unit), and moves again only by that factor."""
    default, fast, faster = (BuiltProgram(bytes([i]), "task") for i in range(3))
    first = Anchor(default, 160e-3)
    assert rebased(first, []) is first and rebased(None, []) is None
    assert rebased(None, [(fast, 0.2), (faster, 0.1)]) == Anchor(faster, 0.1)  # no anchor yet: the fastest
    assert rebased(first, [(fast, 50e-3), (faster, 45e-3)]) is first  # within the span: the anchor stays
    moved = rebased(first, [(fast, 8e-3), (faster, 9e-3)])
    assert moved == Anchor(fast, 8e-3)
    assert rebased(moved, [(faster, 2.5e-3)]) is moved
    assert rebased(moved, [(faster, 8e-3 / MAX_SPAN / 1.01)]).program is faster

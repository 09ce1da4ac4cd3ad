"""Anchored times: each batch's candidates timed alternately with a fixed anchor program, their times read as
ratios to it.

On a shared host the same program's time drifts within a tuning run, so
candidates measured once each, at different times, are ranked by when they
ran as much as by what they are. Scaling a batch by one re-timing of an
anchor before and after it does not help: that re-timing is as noisy as the
candidates, and an anchor that moves to each new best compounds the errors.
So after each batch is run (checked and timed one by one), the anchor
(IREE's default of the task) and the batch's correct programs are timed
alternately for a few rounds, and each candidate's time is the anchor's
recorded time times the median of its per-round ratios to the anchor. The
time as measured alone and the anchor's time in those rounds stay in the
record (`MeasureResult.measured_s`, `reference_s`).

An anchor far slower than the candidates is bound by something else and
does not move with them, so their anchored times swing with its limits, not
theirs. So once a batch holds a program `MAX_SPAN` times faster than the
anchor, that program becomes the anchor, its anchored time its recorded one
(`rebased`): the unit stays the first anchor's, and the later batches are
read against a program like them. It moves only by that factor at a time, a
few times per task at most: an anchor that follows every new best compounds
the errors. (measured: docs/reports/measurement_fidelity.md)
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ansor_mlir.core.measure_result import MeasureResult
from ansor_mlir.measure.builder import BuiltProgram

# Programs slower than this per call are not timed alternately: IREE's default of a large convolution takes
# seconds per call, and each round calls every program at least once.
MAX_ANCHOR_S = 0.5
# Each program's share of a batch's alternated timing, cut into as many rounds as fit between these bounds: a
# shared host's phases flip within a fraction of a second, so short rounds keep most of them inside one phase and
# more rounds outvote the ones that are not; a slow program gets the fewest, each calling it once at least
# (measured: docs/reports/measurement_fidelity.md).
PROGRAM_S = 0.09
MIN_ROUNDS, MAX_ROUNDS = 3, 9
# A batch's fastest program replaces the anchor once the anchor is this many times slower (`rebased`).
MAX_SPAN = 4.0


def rounds_for(anchor_s: float) -> tuple[int, float]:
    """(rounds, least seconds each program is called for in a round) for a batch against an anchor of
    `anchor_s` per call."""
    rounds = max(MIN_ROUNDS, min(MAX_ROUNDS, int(PROGRAM_S / max(anchor_s, 1e-9))))
    return rounds, PROGRAM_S / rounds


@dataclass(frozen=True)
class Anchor:
    """The program each batch is timed against, and its recorded time."""

    program: BuiltProgram
    time_s: float


def usable(time_s: float | None) -> bool:
    """A program this fast is cheap to time alternately with every batch."""
    return time_s is not None and 0 < time_s <= MAX_ANCHOR_S


def anchored_times(anchor_s: float, samples: Sequence[Sequence[float]]) -> tuple[float, list[float]]:
    """(the anchor's time in these rounds, each other program's anchored time) from per-round times, the
    anchor's first: the anchor's recorded time times the median of the program's per-round ratios to it."""
    base = samples[0]
    ratios = [statistics.median(t / b for t, b in zip(times, base, strict=True)) for times in samples[1:]]
    return statistics.median(base), [anchor_s * r for r in ratios]


def anchored(result: MeasureResult, time_s: float | None, reference_s: float | None) -> MeasureResult:
    """The result with its anchored time (unchanged without one, or without a time of its own)."""
    if time_s is None or not result.ok or result.median_s is None:
        return result
    scale = time_s / result.median_s
    spread = result.spread_s * scale if result.spread_s is not None else None
    return replace(result, median_s=time_s, spread_s=spread, measured_s=result.median_s, reference_s=reference_s)


def rebased(current: Anchor | None, programs: Sequence[tuple[BuiltProgram, float]]) -> Anchor | None:
    """The anchor for the next batches: the fastest of a batch's `programs` (each with its anchored time) when
    the current anchor is more than `MAX_SPAN` times slower than it or there is none (IREE's default was too
    slow to anchor, as a large convolution's is), else the current one."""
    if not programs:
        return current
    program, time_s = min(programs, key=lambda p: p[1])
    return Anchor(program, time_s) if current is None or current.time_s > MAX_SPAN * time_s else current

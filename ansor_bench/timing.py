"""Alternating timing of arbitrary zero-argument callables, and output checks.

`ansor_mlir.measure.compare.time_alternately` does this for IREE modules; the
benchmark also times PyTorch, numpy and TVM, so it alternates plain callables
with the same scheme: every round runs each contender for a short slice in
turn, so load from other processes on a shared machine hits all of them
alike, and medians over all rounds are compared. Each timed slice follows an
untimed warm-up slice of the same contender: with several threads, each
runtime keeps its own worker pool, and the first calls after another
contender's slice are slow while its pool wakes and the other's winds down
(Zen 3, 2 threads, DIL, the same tuned programs in two runs of the suite:
ansor-mlir 5.95 ms without the warm-up, 2.58 ms with it; PyTorch 2.99 and
1.64 ms; IREE's default 9.79 and 7.43 ms). Before its warm-up, each slice
waits for the previous contender's pool to stop spinning (`idle_pools`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ansor_bench.idle_pools import wait_for_idle_pools
from ansor_mlir.measure.round_order import round_order
from ansor_mlir.measure.vm_call import PlacedCalls


@dataclass(frozen=True)
class Timing:
    """Per-call seconds of one contender over all alternating rounds."""

    median_s: float
    min_s: float
    calls: int
    round_medians: tuple[float, ...]

    @property
    def spread(self) -> float:
        """Relative spread of the per-round medians (max/min - 1): how noisy this contender's rounds were."""
        return max(self.round_medians) / min(self.round_medians) - 1.0


def warm_up_s(min_round_s: float, warm_s: float | None = None) -> float:
    """The untimed warm-up before each timed slice: `warm_s`, or half a round when None."""
    return min_round_s / 2 if warm_s is None else warm_s


def time_alternately(
    contenders: dict[str, Callable[[], object]], rounds: int = 10, min_round_s: float = 0.05,
    warm_s: float | None = None,
) -> dict[str, Timing]:
    """Time each callable in interleaved rounds; each round calls it for at least `min_round_s`, after the other
    contenders' pools went idle (`idle_pools`) and an untimed warm-up of `warm_s` (default: half a round).
    An IREE program's `PlacedCalls` moves to its next placement of the inputs each round; other callables keep
    theirs."""
    warm_s = warm_up_s(min_round_s, warm_s)
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    per_round: dict[str, list[float]] = {name: [] for name in contenders}
    for fn in contenders.values():
        fn()
    for round_index in range(rounds):
        for name, fn in round_order(list(contenders.items()), round_index):
            if isinstance(fn, PlacedCalls):
                fn.advance()  # the next placement of its inputs, for the whole round
            wait_for_idle_pools()
            warm_until = time.perf_counter() + warm_s
            while time.perf_counter() < warm_until:
                fn()
            this_round = []
            deadline = time.perf_counter() + min_round_s
            while True:
                start = time.perf_counter()
                fn()
                this_round.append(time.perf_counter() - start)
                if time.perf_counter() >= deadline:
                    break
            samples[name].extend(this_round)
            per_round[name].append(statistics.median(this_round))
    return {
        name: Timing(statistics.median(times), min(times), len(times), tuple(per_round[name]))
        for name, times in samples.items()
    }


def window_ratios(baseline: Sequence[float], contender: Sequence[float], rounds: int) -> list[float]:
    """Speedups of `contender` over `baseline` (their per-round medians, same rounds) read from every run of
    `rounds` consecutive rounds: what a comparison `rounds` long could have reported at each point of the run.

    On a shared host the phases last seconds and hit one runtime more than another, so a short comparison can
    land inside one (`tools/timing_window_report.py`); the spread of these ratios says how long is long enough.
    """
    if len(baseline) != len(contender):
        raise ValueError(f"{len(baseline)} baseline rounds against {len(contender)} contender rounds")
    return [statistics.median(baseline[i:i + rounds]) / statistics.median(contender[i:i + rounds])
            for i in range(len(baseline) - rounds + 1)]


def mismatch(outputs: list[np.ndarray], references: list[np.ndarray], rtol: float = 2e-3) -> str | None:
    """Why outputs differ from the numpy reference, or None if they match.

    The absolute tolerance scales with the reference's magnitude: f32
    reductions over thousands of terms differ from a float64 reference in
    the last few bits of the largest values.
    """
    if len(outputs) != len(references):
        return f"{len(outputs)} outputs, expected {len(references)}"
    for i, (out, ref) in enumerate(zip(outputs, references, strict=True)):
        out = np.asarray(out)
        if out.shape != ref.shape:
            return f"output {i}: shape {out.shape}, expected {ref.shape}"
        if not np.all(np.isfinite(out)):
            return f"output {i}: non-finite values"
        atol = rtol * max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)
        err = np.abs(out.astype(np.float64) - ref.astype(np.float64))
        bad = err > atol + rtol * np.abs(ref)
        if np.any(bad):
            return f"output {i}: {int(bad.sum())} of {ref.size} values off (max abs error {float(err.max()):.3g})"
    return None

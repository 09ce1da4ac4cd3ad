"""Run the benchmark: per workload, prepare every contender, check it, then time all alternately.

Order per workload: numpy reference once; each contender prepared (compiled
or tuned) and its output checked against the reference, a mismatch marking
the cell `wrong` and keeping it out of the timing; then every correct
contender timed in interleaved rounds on the same inputs, so a burst of load
from other processes slows them all alike and the ratios hold.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import numpy as np

from ansor_bench.contenders import Contender, Prepared, Settings, Unavailable
from ansor_bench.roofline import PeakCall, Roofline
from ansor_bench.timing import Timing, mismatch, time_alternately, warm_up_s
from ansor_bench.workloads import Workload

OK = "ok"


@dataclass(frozen=True)
class Cell:
    """One contender on one workload: its status, time and share of the physical limit."""

    workload: str
    op: str
    contender: str
    status: str
    median_s: float | None = None
    min_s: float | None = None
    spread: float | None = None
    calls: int = 0
    gflops: float | None = None
    pct_peak: float | None = None
    # Of the FMA kernel's median over the same alternated rounds (`run_workload`): the peak in the op's own hour.
    pct_peak_rounds: float | None = None
    pct_roofline: float | None = None
    prepare_s: float | None = None
    trials: int | None = None
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Curve:
    """Best time found so far after each trial of a tuner on one workload."""

    workload: str
    contender: str
    best_s: tuple[float, ...]


# Alternated rounds per op. On a shared 2-vCPU guest the host's phases last seconds and slow one runtime more
# than another: 10 rounds of five contenders (about 4 s) read the same softmax programs at 0.65-1.15x PyTorch
# from one comparison to the next; over 15 s windows the ratios of GMM, softmax and TBS moved 0.71-0.84x
# (about +-8% of their medians)
# (`tools/timing_window_report.py`, `docs/reports/timing_windows.md`).
DEFAULT_ROUNDS = 40


@dataclass(frozen=True)
class TimingPlan:
    rounds: int = DEFAULT_ROUNDS
    min_round_s: float = 0.05
    # The untimed warm-up before each timed slice (`time_alternately`): None is half a round.
    warm_s: float | None = None

    @property
    def warm_up_s(self) -> float:
        return warm_up_s(self.min_round_s, self.warm_s)


def rescored(cell: Cell, workload: Workload, roofline: Roofline) -> Cell:
    """The cell's shares of the physical limit against a (re)measured roofline."""
    if cell.median_s is None:
        return cell
    return replace(
        cell,
        pct_peak=100.0 * workload.flops / cell.median_s / roofline.peak_flops,
        pct_roofline=100.0 * roofline.fraction(workload.flops, workload.min_bytes, cell.median_s),
    )


# The name the FMA kernel is timed under beside an op's contenders; no contender is called so.
PEAK_KEY = "peak (FMA kernel)"


def rounds_peak_flops(peak: PeakCall, seconds: Timing, threads: int) -> float:
    """The peak FLOP/s in the rounds the FMA kernel was timed in: its median call on one core, times `threads`
    (the kernel runs on the calling thread, as `Roofline.scaled` counts cores)."""
    return threads * peak.flops / seconds.median_s


def _timed_cell(workload: Workload, contender: str, prepared: Prepared, seconds: Timing, roofline: Roofline,
                peak_flops: float | None = None) -> Cell:
    median = seconds.median_s
    return Cell(
        workload=workload.label, op=workload.name, contender=contender, status=OK,
        median_s=median, min_s=seconds.min_s, spread=seconds.spread, calls=seconds.calls,
        gflops=workload.flops / median / 1e9,
        pct_peak=100.0 * workload.flops / median / roofline.peak_flops,
        pct_peak_rounds=None if peak_flops is None else 100.0 * workload.flops / median / peak_flops,
        pct_roofline=100.0 * roofline.fraction(workload.flops, workload.min_bytes, median),
        prepare_s=prepared.prepare_s, trials=prepared.trials, note=prepared.note,
    )


def run_workload(
    workload: Workload,
    contenders: list[Contender],
    settings: Settings,
    roofline: Roofline,
    plan: TimingPlan,
    status: Callable[[str], None] = lambda _: None,
    peak: PeakCall | None = None,
) -> tuple[list[Cell], list[Curve]]:
    """All contenders on one workload; cells in contender order, curves of the tuners.

    With `peak`, the FMA kernel is timed in the same rounds as the contenders and each cell also reads its share
    of that peak (`pct_peak_rounds`): the run's peak is the best of two measurements an hour apart, and this host's
    clock moves by the hour (every GMM contender 8-12% slower in one run than in the one before), so a share of it
    moves with the hour; a share of the same rounds' peak does not.
    """
    inputs = workload.inputs(settings.seed)
    status(f"{workload.label}: numpy reference")
    reference = workload.reference(inputs)
    ready: dict[str, Prepared] = {}
    cells: dict[str, Cell] = {}
    curves = []
    for contender in contenders:
        status(f"{workload.label}: preparing {contender.name}")
        try:
            prepared = contender.prepare(workload, inputs, settings)
        except Unavailable as exc:
            cells[contender.name] = Cell(workload.label, workload.name, contender.name, exc.status, note=exc.reason)
            continue
        except Exception as exc:  # noqa: BLE001 - a contender's bug is one failed cell, not a lost run
            note = f"{type(exc).__name__}: {exc}"[:300]
            cells[contender.name] = Cell(workload.label, workload.name, contender.name, "failed", note=note)
            continue
        if prepared.curve:
            curves.append(Curve(workload.label, contender.name, prepared.curve))
        why = mismatch(prepared.fetch(), reference)
        if why:
            cells[contender.name] = Cell(workload.label, workload.name, contender.name, "wrong", note=why,
                                         prepare_s=prepared.prepare_s, trials=prepared.trials)
            continue
        ready[contender.name] = prepared
    if ready:
        status(f"{workload.label}: timing {len(ready)} contenders alternately")
        calls = {name: p.call for name, p in ready.items()}
        if peak is not None:
            calls[PEAK_KEY] = peak.call
        times = time_alternately(calls, plan.rounds, plan.min_round_s, plan.warm_up_s)
        peak_flops = None if peak is None else rounds_peak_flops(peak, times[PEAK_KEY], settings.threads)
        for name, prepared in ready.items():
            cells[name] = _timed_cell(workload, name, prepared, times[name], roofline, peak_flops)
    return [cells[c.name] for c in contenders], curves


def speedup(cells: list[Cell], workload: str, contender: str, baseline: str) -> float | None:
    """baseline time / contender time on one workload, when both ran correctly."""
    by_name = {c.contender: c for c in cells if c.workload == workload and c.status == OK}
    if contender in by_name and baseline in by_name:
        return by_name[baseline].median_s / by_name[contender].median_s
    return None


def geomean_speedup(cells: list[Cell], contender: str, baseline: str) -> tuple[float | None, int]:
    """Geometric-mean speedup over the workloads where both ran correctly, and how many those were."""
    workloads = list(dict.fromkeys(c.workload for c in cells))
    ratios = [r for w in workloads if (r := speedup(cells, w, contender, baseline)) is not None]
    if not ratios:
        return None, 0
    return float(math.exp(np.mean(np.log(ratios)))), len(ratios)

"""The best measured micro-kernel with each other register shape: its tiles kept, or the nearest that fit.

The cost model ranks a register shape by the few programs of it that were
measured, and the first of those is a random draw. TBS's 64-trial search on
Zen 3 (the AVX2 table at 7212281) measured 48 candidates of 8x8, two of 4x16
and one of 6x16 (0.97x IREE's default, with poor cache tiles) and kept 8x8:
its best ran 382 us, while the same tiles with 6x16 registers ran 327 us and
with 4x16 337 us (timed alternately, PyTorch 320 us). A shape's worth shows
only beside tiles that suit the problem, so each new best micro-kernel is
measured again with every other shape the sketch offers: its tile chains as
they are where they fit the shape (`annotation.is_valid`), otherwise with the
fewest and nearest changes that make them fit.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from ansor_mlir.core.schedule import Candidate, MicroKernel, Sketch, TileKnob, tile_knobs
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.space.annotation import divisors, is_valid

# Tile chains of one knob tried per repair (nearest first); a knob with more chains is repaired among these.
MAX_CHAINS = 4096
# Nearest chains per knob combined when two knobs must change together.
PAIR_CHAINS = 24


def divisor_chains(knob: TileKnob) -> list[tuple[int, ...]]:
    """Every value of a (non-padded) tile knob, up to `MAX_CHAINS`: outer to inner, each dividing the one above."""
    out: list[tuple[int, ...]] = []

    def extend(prefix: tuple[int, ...], bound: int) -> Iterator[tuple[int, ...]]:
        if len(prefix) == len(knob.levels):
            yield prefix
            return
        for d in divisors(bound):
            yield from extend((*prefix, d), d)

    for chain in extend((), knob.outer_bound):
        out.append(chain)
        if len(out) >= MAX_CHAINS:
            break
    return out


def distance(a: tuple[int, ...], b: tuple[int, ...]) -> float:
    """How far two chains of one knob are apart: the sum of their tiles' log2 ratios."""
    return sum(abs(math.log2(x / y)) for x, y in zip(a, b, strict=True))


def nearest_chains(knob: TileKnob, current: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The knob's other chains, nearest to `current` first."""
    return sorted((c for c in divisor_chains(knob) if c != current), key=lambda c: distance(c, current))


def fitted(
    values: dict[str, tuple[int, ...]], sketch: Sketch, task: Task, target: Target
) -> dict[str, tuple[int, ...]] | None:
    """`values` if valid, else with one tile knob changed to its nearest chain that makes them valid, else with
    two changed (among their `PAIR_CHAINS` nearest), else None."""
    if is_valid(sketch, values, task, target):
        return values
    knobs = [k for k in tile_knobs(sketch.knobs) if not k.padded]
    options = {k.name: nearest_chains(k, values[k.name]) for k in knobs}
    single = [(distance(c, values[k.name]), k.name, c) for k in knobs for c in options[k.name]]
    for _, name, chain in sorted(single):
        trial = {**values, name: chain}
        if is_valid(sketch, trial, task, target):
            return trial
    pairs = []
    for i, a in enumerate(knobs):
        for b in knobs[i + 1:]:
            for ca in options[a.name][:PAIR_CHAINS]:
                for cb in options[b.name][:PAIR_CHAINS]:
                    pairs.append((distance(ca, values[a.name]) + distance(cb, values[b.name]), a.name, ca, b.name, cb))
    for _, na, ca, nb, cb in sorted(pairs):
        trial = {**values, na: ca, nb: cb}
        if is_valid(sketch, trial, task, target):
            return trial
    return None


def shape_neighbours(candidate: Candidate, sketch: Sketch, task: Task, target: Target) -> list[Candidate]:
    """`candidate` with each other register shape of its sketch's micro-kernel (`fitted`), in the knob's order;
    none for a sketch without one."""
    kernel = sketch.step(MicroKernel)
    if not isinstance(kernel, MicroKernel):
        return []
    (knob,) = kernel.knobs
    values = dict(candidate.values)
    out = []
    for index in range(len(knob.options)):
        if (index,) == values.get(knob.name):
            continue
        trial = fitted({**values, knob.name: (index,)}, sketch, task, target)
        if trial is not None:
            out.append(Candidate(candidate.task_key, candidate.sketch_index, tuple(sorted(trial.items()))))
    return out

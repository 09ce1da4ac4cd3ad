"""Annotation: fill a sketch's holes by random sampling, rejecting invalid programs.

All randomness comes from the `random.Random` passed in, so the same seed
gives the same candidates. Constraints that we know IREE rejects (or that
make compile time explode) are checked here, before anything is compiled,
against the target's own limits (`space.limits`): each step of the trace
lists its checks (`steps.checks` and the kinds' own), and each narrows how its
knobs are drawn, so that draws rarely need rejecting.
"""

from __future__ import annotations

import random
from dataclasses import replace
from functools import lru_cache
from math import gcd

from ansor_mlir.core.schedule import (
    REDUCTION,
    Candidate,
    ChoiceKnob,
    Family,
    Knob,
    Sketch,
    TileKnob,
    is_register_level,
    tile_knobs,
)
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.space import dag as dags
from ansor_mlir.space.resolve import Resolved, resolve, sketch_dag
from ansor_mlir.steps.checks import Check, CheckContext
from ansor_mlir.steps.configure_pipeline import (
    pipeline_cache_level_vector_elements as pipeline_cache_level_vector_elements,
)
from ansor_mlir.steps.configure_pipeline import (
    pipeline_cache_tile_vector_elements as pipeline_cache_tile_vector_elements,
)
from ansor_mlir.steps.configure_pipeline import pipeline_consumer_vector_elements as pipeline_consumer_vector_elements
from ansor_mlir.steps.configure_pipeline import vector_tiles as vector_tiles
from ansor_mlir.steps.pad import round_up
from ansor_mlir.steps.registry import checks_of, kinds_of

MAX_TRIES = 200


@lru_cache(maxsize=4096)
def divisors(n: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


def with_tile(chain: tuple[int, ...], level: int, size: int) -> tuple[int, ...]:
    """`chain` with its tile at `level` set to `size`, the tiles inside it shrunk to keep dividing."""
    out = [*chain[:level], size]
    for tile in chain[level + 1:]:
        out.append(gcd(tile, out[-1]))
    return tuple(out)


def sample_chain(knob: TileKnob, rng: random.Random, lanes: int = 1, floor: int = 1) -> tuple[int, ...]:
    """Tile sizes for one loop, outer to inner, each dividing the one above.

    With `lanes > 1` the innermost tile is drawn first among whole vectors
    (multiples of `lanes`, or the whole loop) and every outer tile is a
    multiple of it, so the loop vectors run along never needs rejecting.
    Tiles above the register levels (`vector_*`) are at least `floor` (or
    the whole bound).
    """
    inner = None
    if lanes > 1:
        inner = rng.choice([d for d in divisors(knob.extent) if d % lanes == 0 or d == knob.extent])
    sizes = []
    bound = knob.outer_bound
    for i, level in enumerate(knob.levels):
        if inner is not None and i == len(knob.levels) - 1:
            size = inner
        else:
            least = 1 if is_register_level(level) else min(floor, bound)
            size = rng.choice([d for d in divisors(bound) if (inner is None or d % inner == 0) and d >= least])
        sizes.append(size)
        bound = size
    return tuple(sizes)


# Largest non-divisor register tile of a padded knob that is not the vector loop.
MAX_PADDED_TILE = 16


def padded_register_options(bound: int, lanes: int) -> tuple[int, ...]:
    """Register tiles of a padded loop under a tile of `bound`: its divisors and padded sizes.

    The vector loop (`lanes > 1`) takes whole vectors up to `bound` rounded up
    to a vector (a 109-wide loop gets 16, 32, ..., 112); other loops any size
    up to `MAX_PADDED_TILE` (a 109-row loop gets 2 to 16 rows).
    """
    if lanes > 1:
        padded = range(lanes, round_up(bound, lanes) + 1, lanes)
    else:
        padded = range(2, min(bound, MAX_PADDED_TILE) + 1)
    return tuple(sorted(set(divisors(bound)) | set(padded)))


def sample_padded_chain(knob: TileKnob, rng: random.Random, lanes: int = 1) -> tuple[int, ...]:
    """Outer tiles as divisor chains, the register tile among `padded_register_options`."""
    outer = sample_chain(replace(knob, levels=knob.levels[:-1], padded=False), rng) if knob.levels[1:] else ()
    bound = outer[-1] if outer else knob.extent
    options = padded_register_options(bound, lanes)
    if lanes > 1:
        options = tuple(o for o in options if o % lanes == 0 or o == bound) or options
    return (*outer, rng.choice(options))


def sample_value(knob: Knob, rng: random.Random, lanes: int = 1, floor: int = 1) -> tuple[int, ...]:
    """A random value for any knob: a tile chain (outer tiles at least `floor`) or an option index."""
    if isinstance(knob, ChoiceKnob):
        return (rng.randrange(len(knob.options)),)
    if knob.padded:
        return sample_padded_chain(knob, rng, lanes)
    return sample_chain(knob, rng, lanes, floor)


def leading_knob(sketch: Sketch) -> ChoiceKnob | None:
    """The knob drawn before the others because its option bounds their tiles (a micro-kernel's register shape)."""
    return next((knob for kind, step in kinds_of(sketch) if (knob := kind.leading_knob(step)) is not None), None)


def register_shape(sketch: Sketch, values: dict[str, tuple[int, ...]]) -> str | None:
    """The option `values` choose for the sketch's leading knob (a micro-kernel's shape `MRxNR`); None without
    one or its choice."""
    knob = leading_knob(sketch)
    if knob is None or knob.name not in values:
        return None
    return knob.options[values[knob.name][0]]


def knob_bounds(sketch: Sketch, task: Task, target: Target, shape: str | None = None
                ) -> tuple[dict[str, int], dict[str, int]]:
    """Per knob, the lanes its tiles are whole multiples of and the least tile above the register levels
    (`sample_chain`'s `lanes` and `floor`): what `is_valid` asks, drawn so rather than rejected. `shape` is the
    option drawn for the leading knob (`register_shape`), which the steps' bounds may depend on
    (`StepKind.bounds`)."""
    bounds: tuple[dict[str, int], dict[str, int]] = (vector_knobs(sketch, task, target), {})
    dag = sketch_dag(sketch, task)
    for kind, step in kinds_of(sketch):
        bounds = kind.bounds(step, sketch, dag, target, task.root.element_bytes, bounds, shape)
    return bounds


def vector_knobs(sketch: Sketch, task: Task, target: Target) -> dict[str, int]:
    """Knobs whose innermost tile must be whole vectors, with the lane count (what `is_valid` checks): the
    output's vector loop, and the loops the steps keep in whole vectors (`StepKind.vector_dims`)."""
    lanes = target.vector_lanes(task.root.element_bytes)
    tiles = tile_knobs(sketch.knobs)
    if sketch.family is not Family.TRANSFORM:
        innermost = max((k for k in tiles if k.kind != REDUCTION), key=lambda k: k.dim, default=None)
        return {innermost.name: lanes} if innermost is not None else {}
    dag = sketch_dag(sketch, task)
    assert dag is not None
    root = dag.ops[dag.root]
    outputs = dags.output_dims(root)
    dims = [outputs[-1]] if outputs and outputs[-1] is not None else []
    for kind, step in kinds_of(sketch):
        dims += kind.vector_dims(step, root)
    return {k.name: lanes for k in tiles if k.dim in dims and k.of_root}


def sketch_checks(sketch: Sketch) -> tuple[Check, ...]:
    """The checks a candidate of the sketch must pass (`steps.registry.checks_of`)."""
    return checks_of(sketch)


def is_valid_strategy(resolved: Resolved, target: Target) -> bool:
    """The checks of a resolved candidate (the register budget, vector shapes and stack buffers of a transform
    strategy, over the root as codegen sees it)."""
    ctx = CheckContext(resolved.sketch, dict(resolved.candidate.values), resolved.task, target,
                       lambda *_: resolved)
    return all(check(ctx) for check in sketch_checks(resolved.sketch))


def is_valid(sketch: Sketch, values: dict[str, tuple[int, ...]], task: Task, target: Target) -> bool:
    """Reject programs IREE cannot build well, before compiling them."""
    ctx = CheckContext(sketch, values, task, target, resolve)
    return all(check(ctx) for check in sketch_checks(sketch))


def sample_candidate(sketch: Sketch, task: Task, target: Target, rng: random.Random) -> Candidate | None:
    """One random valid candidate of a sketch, or None if none was found."""
    if not sketch.knobs:
        return Candidate(task.key, sketch.index, ())
    shape_knob = leading_knob(sketch)
    bounds = {shape: knob_bounds(sketch, task, target, shape)
              for shape in (shape_knob.options if shape_knob is not None else (None,))}
    for _ in range(MAX_TRIES):
        # The leading knob first (a micro-kernel's register shape): the row and column tiles are drawn to fit it.
        values = {shape_knob.name: sample_value(shape_knob, rng)} if shape_knob is not None else {}
        lanes, floors = bounds[register_shape(sketch, values)]
        values.update({knob.name: sample_value(knob, rng, lanes.get(knob.name, 1), floors.get(knob.name, 1))
                       for knob in sketch.knobs if knob.name not in values})
        if is_valid(sketch, values, task, target):
            return Candidate(task.key, sketch.index, tuple(sorted(values.items())))
    return None



def sample_fresh(
    sketches: list[Sketch], task: Task, target: Target, rng: random.Random, count: int, seen: set[str]
) -> list[Candidate]:
    """Up to `count` random candidates of the open sketches not in `seen` (which is updated)."""
    open_sketches = [s for s in sketches if s.knobs]
    out: list[Candidate] = []
    for _ in range(count * 10 + 20):
        if len(out) >= count or not open_sketches:
            break
        candidate = sample_candidate(rng.choice(open_sketches), task, target, rng)
        if candidate is not None and candidate.identity not in seen:
            seen.add(candidate.identity)
            out.append(candidate)
    return out

"""Evolutionary search guided by the learned cost model (Ansor's search policy).

Each round starts a population from fresh random annotations plus the best
programs measured so far, evolves it for a few generations with mutation and
crossover (fitness = the cost model's predicted throughput), and returns the
best predicted unmeasured candidates, with an epsilon share of random ones so
the model keeps seeing programs it would not pick. After each measured batch
the model is retrained on everything measured.

Crossover is done knob-wise between parents of the same sketch: each knob
(one loop's tile chain, or one categorical decision) is inherited whole from
one parent, so every chain stays a valid divisor chain and only the
cross-knob constraints need rechecking.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import numpy as np

from ansor_mlir.core.measure_result import MeasureResult
from ansor_mlir.core.schedule import Candidate, ChoiceKnob, Knob, Sketch, tile_knobs
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.model.cost_model import CostModel, TrainingSet
from ansor_mlir.model.registry import make_cost_model
from ansor_mlir.search.search_context import Structure, TaskContext, structure
from ansor_mlir.search.shape_neighbours import shape_neighbours
from ansor_mlir.space.annotation import (
    divisors,
    is_valid,
    knob_bounds,
    padded_register_options,
    register_shape,
    sample_fresh,
    sample_value,
    vector_knobs,
    with_tile,
)

# Re-samples of another knob tried when a mutation alone leaves the candidate invalid (`repaired`).
REPAIRS = 8
# Selection weight of the population's worst-scored candidate, against 1 + this for its best.
SELECTION_FLOOR = 1e-3


@dataclass(frozen=True)
class EvolutionParams:
    """Search parameters (Ansor's defaults, scaled for a 2-core machine)."""

    population: int = 512
    generations: int = 4
    # Chance that a child comes from crossover (when its parents share a sketch); otherwise mutation.
    crossover_prob: float = 0.3
    # Share of each measured batch picked at random instead of by the model (at least one).
    eps_greedy: float = 0.05
    # Best measured programs seeded into every initial population.
    elite_measured: int = 16
    # Best predicted programs carried unchanged into the next generation.
    elite_predicted: int = 16


def mutate(candidate: Candidate, sketch: Sketch, task: Task, target: Target, rng: random.Random) -> Candidate | None:
    """Change one knob: re-pick one tile level (inner levels shrink to stay divisors; a padded register
    tile may become any padded size) or one choice; a change that is invalid alone is `repaired`."""
    values = dict(candidate.values)
    for _ in range(8):
        knob = rng.choice(sketch.knobs)
        old = values[knob.name]
        if isinstance(knob, ChoiceKnob):
            if len(knob.options) < 2:
                continue
            new = (rng.choice([i for i in range(len(knob.options)) if i != old[0]]),)
        else:
            level = rng.randrange(len(old))
            bound = knob.outer_bound if level == 0 else old[level - 1]
            sizes = divisors(bound)
            if knob.padded and level == len(old) - 1:
                # Padded register tiles: whole vectors (or small row counts) that need not divide the loop.
                sizes = padded_register_options(bound, vector_knobs(sketch, task, target).get(knob.name, 1))
            options = [d for d in sizes if d != old[level]]
            if not options:
                continue
            new = with_tile(old, level, rng.choice(options))
        trial = {**values, knob.name: new}
        if is_valid(sketch, trial, task, target) or (trial := repaired(trial, knob, sketch, task, target, rng)):
            return Candidate(candidate.task_key, candidate.sketch_index, tuple(sorted(trial.items())))
    return None


def repaired(
    values: dict[str, tuple[int, ...]], changed: Knob, sketch: Sketch, task: Task, target: Target, rng: random.Random
) -> dict[str, tuple[int, ...]] | None:
    """`values` made valid by re-sampling one other tile knob whole, or None after `REPAIRS` tries.

    A change that one knob alone cannot make valid is otherwise out of reach
    of mutation: a micro-kernel of 4x16 whose row tile is 4 cannot become
    6x16 (rows of at least 6) by changing either the shape or the tile, so
    the search stayed on the shape its first good sample had (C3D: 27
    window candidates of 4x16, one of 6x16, while a 6x16 tiling ran 1.07x
    the best 4x16).
    """
    others = [k for k in tile_knobs(sketch.knobs) if k.name != changed.name]
    if not others:
        return None
    lanes, floors = knob_bounds(sketch, task, target, register_shape(sketch, values))
    for _ in range(REPAIRS):
        knob = rng.choice(others)
        trial = {**values, knob.name: sample_value(knob, rng, lanes.get(knob.name, 1), floors.get(knob.name, 1))}
        if is_valid(sketch, trial, task, target):
            return trial
    return None


def crossover(
    a: Candidate, b: Candidate, sketch: Sketch, task: Task, target: Target, rng: random.Random
) -> Candidate | None:
    """A child inheriting each knob whole from one of two parents of the same sketch."""
    va, vb = dict(a.values), dict(b.values)
    for _ in range(4):
        child = {k.name: (va if rng.random() < 0.5 else vb)[k.name] for k in sketch.knobs}
        if child != va and child != vb and is_valid(sketch, child, task, target):
            return Candidate(a.task_key, a.sketch_index, tuple(sorted(child.items())))
    return None


def selection_weights(scores: np.ndarray) -> np.ndarray:
    """Parent selection weights from predicted scores: scaled to 0..1 over the population, plus a floor.

    A ranking objective's scores are only ordered (any sign, any scale), so
    they are shifted and scaled; the floor leaves the worst a small chance.
    """
    spread = float(np.ptp(scores)) if len(scores) else 0.0
    scaled = (scores - scores.min()) / spread if spread > 0 else np.ones_like(scores)
    return scaled + SELECTION_FLOOR


def first_of_each_structure(
    ranked: list[Candidate], by_index: dict[int, Sketch], tried: set[Structure], count: int
) -> list[Candidate]:
    """The best-ranked candidate of each structure not in `tried`, up to `count`, best first.

    The model ranks shapes it has data on above those it has none on: the
    shipped model put the README example's 6x16 transform micro-kernels
    (1.4-1.6x IREE's default on Zen 3) below every 4x16 pipeline one
    (1.0-1.2x), and a 32-trial search measured one random 2x32 of that
    sketch and no 6x16. One measurement of each shape lets the model learn it.
    """
    firsts: dict[Structure, Candidate] = {}
    for candidate in ranked:
        key = structure(candidate, by_index)
        if key not in tried and key not in firsts:
            firsts[key] = candidate
    return list(firsts.values())[:count]


@dataclass
class EvolutionarySearch:
    """Model-guided evolutionary search behind the `SearchPolicy` interface: one cost model shared by all tasks,
    one `TaskContext` per task."""

    target: Target
    rng: random.Random
    model: CostModel = field(default_factory=make_cost_model)
    params: EvolutionParams = field(default_factory=EvolutionParams)
    data: TrainingSet = field(default_factory=TrainingSet)
    contexts: dict[str, TaskContext] = field(default_factory=dict)
    name: str = "evolutionary"

    def context(self, task: Task, sketches: list[Sketch]) -> TaskContext:
        """The task's context, its sketches as given now."""
        ctx = self.contexts.get(task.key)
        if ctx is None:
            ctx = self.contexts[task.key] = TaskContext(task, {})
        ctx.by_index = {s.index: s for s in sketches}
        return ctx

    def next_batch(self, task: Task, sketches: list[Sketch], measured: set[str], size: int) -> list[Candidate]:
        """First one candidate of every structure (sketch and register tile shape) not measured yet, the
        model's best of it (a model cannot rank a structure it has seen no measurement of), then the best
        measured micro-kernel's tiles with each other register shape (`shape_neighbours`), then model picks,
        plus an eps share of random ones (at least one)."""
        ctx = self.context(task, sketches)
        seen = set(measured)
        tried = ctx.structures_tried
        by_index = ctx.by_index
        n_random = min(size, max(1, math.ceil(size * self.params.eps_greedy)))
        ranked = [c for _, c in self.evolve(task, sketches, seen)]
        batch = first_of_each_structure(ranked, by_index, tried, size - n_random)
        seen |= {c.identity for c in batch}
        neighbours = [c for c in self._incumbent_neighbours(ctx) if c.identity not in seen]
        batch += neighbours[: max(0, size - n_random - len(batch))]
        seen |= {c.identity for c in batch}
        covered = {index for index, _ in tried} | {c.sketch_index for c in batch}
        for sketch in sketches:  # a sketch evolution left no candidate of gets a random one
            if sketch.knobs and sketch.index not in covered and len(batch) < size - n_random:
                batch += sample_fresh([sketch], task, self.target, self.rng, 1, seen)
        picks = [c for c in ranked if c.identity not in seen][: max(0, size - len(batch) - n_random)]
        seen |= {c.identity for c in picks}
        batch += picks
        batch += sample_fresh(sketches, task, self.target, self.rng, size - len(batch), seen)
        tried |= {structure(c, by_index) for c in batch}
        return batch

    def _incumbent_neighbours(self, ctx: TaskContext) -> list[Candidate]:
        """`shape_neighbours` of the task's best measured candidate, once per best."""
        best = ctx.best
        if best is None or best.identity in ctx.neighboured or best.sketch_index not in ctx.by_index:
            return []
        ctx.neighboured.add(best.identity)
        return shape_neighbours(best, ctx.by_index[best.sketch_index], ctx.task, self.target)

    def update(self, task: Task, sketches: list[Sketch], results: list[tuple[Candidate, MeasureResult]]) -> None:
        ctx = self.context(task, sketches)
        known = [(c, r) for c, r in results if c.sketch_index in ctx.by_index]
        if not known:
            return
        ctx.structures_tried.update(structure(c, ctx.by_index) for c, _ in known)
        features = ctx.features([c for c, _ in known], self.model.extractor, self.target)
        times = np.array([r.median_s if r.ok and r.median_s else np.inf for _, r in known])
        self.data.add(task.key, features, times)
        ctx.record([(r.median_s, c) for c, r in known if r.ok and r.median_s])
        self.model.update(self.data)

    def predicted(self, ctx: TaskContext, candidates: list[Candidate], nprng: np.random.Generator | None = None
                  ) -> np.ndarray:
        """The model's scores of candidates of the context's task."""
        return self.model.predict(ctx.features(candidates, self.model.extractor, self.target), nprng)

    def evolve(self, task: Task, sketches: list[Sketch], exclude: set[str]) -> list[tuple[float, Candidate]]:
        """(predicted score, candidate) explored by evolution, best first (none of `exclude`)."""
        ctx = self.context(task, sketches)
        open_sketches = [s for s in sketches if s.knobs]
        if not open_sketches:
            return []
        nprng = np.random.default_rng(self.rng.getrandbits(32))
        population = self._initial_population(ctx, open_sketches)
        scores: dict[str, tuple[float, Candidate]] = {}
        for generation in range(self.params.generations + 1):
            fresh = [c for c in population if c.identity not in scores]
            if fresh:
                for c, p in zip(fresh, self.predicted(ctx, fresh, nprng), strict=True):
                    scores[c.identity] = (float(p), c)
            if generation == self.params.generations or not population:  # a tiny space can be sampled out
                break
            population = self._next_generation(ctx, population, scores, nprng)
        ranked = sorted(scores.values(), key=lambda item: -item[0])
        return [(score, c) for score, c in ranked if c.identity not in exclude]

    def _initial_population(self, ctx: TaskContext, open_sketches: list[Sketch]) -> list[Candidate]:
        population = [c for _, c in ctx.history[: self.params.elite_measured]]
        seen = {c.identity for c in population}
        fresh = sample_fresh(open_sketches, ctx.task, self.target, self.rng, self.params.population - len(population),
                             seen)
        return population + fresh

    def _next_generation(
        self,
        ctx: TaskContext,
        population: list[Candidate],
        scores: dict[str, tuple[float, Candidate]],
        nprng: np.random.Generator,
    ) -> list[Candidate]:
        task, by_index = ctx.task, ctx.by_index
        fitness = selection_weights(np.array([scores[c.identity][0] for c in population]))
        order = np.argsort(-fitness)
        children = [population[i] for i in order[: self.params.elite_predicted]]
        seen = {c.identity for c in children}
        parents = nprng.choice(len(population), size=self.params.population * 4, p=fitness / fitness.sum())
        for i, j in zip(parents[0::2], parents[1::2], strict=False):
            if len(children) >= self.params.population:
                break
            a, b = population[i], population[j]
            sketch = by_index[a.sketch_index]
            child = None
            if a.sketch_index == b.sketch_index and self.rng.random() < self.params.crossover_prob:
                child = crossover(a, b, sketch, task, self.target, self.rng)
            if child is None:
                child = mutate(a, sketch, task, self.target, self.rng)
            if child is not None and child.identity not in seen:
                seen.add(child.identity)
                children.append(child)
        return children

    def can_predict(self) -> bool:
        """A trained model (the shipped one or one loaded) ranks candidates nothing was measured of."""
        return self.model.trained

    def predict_best(self, task: Task, sketches: list[Sketch], count: int) -> list[Candidate]:
        """Zero-trial mode: the model's top candidates, IREE's default included as a contender."""
        scored = self.evolve(task, sketches, set())
        fixed = [Candidate(task.key, s.index, ()) for s in sketches if not s.knobs]
        if fixed:
            predicted = self.predicted(self.context(task, sketches), fixed)
            scored += [(float(p), c) for p, c in zip(predicted, fixed, strict=True)]
        scored.sort(key=lambda item: -item[0])
        return [c for _, c in scored[:count]]

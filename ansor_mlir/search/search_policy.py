"""Search policies: which candidates to measure next.

A policy proposes batches; the tuner measures them and reports back. Random
search is the baseline; the evolutionary search with a learned cost model
plugs in behind the same interface.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ansor_mlir.core.measure_result import MeasureResult
from ansor_mlir.core.schedule import Candidate, Sketch
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.errors import AnsorError
from ansor_mlir.model.cost_model import CostModel
from ansor_mlir.model.registry import load_cost_model, make_cost_model, pretrained_model
from ansor_mlir.search.evolutionary_search import EvolutionarySearch
from ansor_mlir.space.annotation import sample_fresh


class SearchPolicy(Protocol):
    name: str

    def next_batch(
        self, task: Task, sketches: list[Sketch], measured: set[str], size: int
    ) -> list[Candidate]: ...

    def update(self, task: Task, sketches: list[Sketch], results: list[tuple[Candidate, MeasureResult]]) -> None:
        """Learn from measurements (this run's, or a resumed log's)."""
        ...

    def can_predict(self) -> bool:
        """Whether `predict_best` can rank candidates with nothing measured (zero-trial mode)."""
        ...

    def predict_best(self, task: Task, sketches: list[Sketch], count: int) -> list[Candidate]:
        """The `count` candidates predicted fastest, best first (only when `can_predict`)."""
        ...


@dataclass
class RandomSearch:
    """Sample fresh random candidates; never propose one measured before."""

    target: Target
    rng: random.Random
    name: str = "random"

    def next_batch(
        self, task: Task, sketches: list[Sketch], measured: set[str], size: int
    ) -> list[Candidate]:
        return sample_fresh(sketches, task, self.target, self.rng, size, set(measured))

    def update(self, task: Task, sketches: list[Sketch], results: list[tuple[Candidate, MeasureResult]]) -> None:
        return None

    def can_predict(self) -> bool:
        return False

    def predict_best(self, task: Task, sketches: list[Sketch], count: int) -> list[Candidate]:
        return []


POLICIES = ("evolutionary", "random")


def make_policy(
    name: str, target: Target, rng: random.Random, cost_model: Path | CostModel | None = None,
    pretrained: bool = True,
) -> SearchPolicy:
    """A policy by name; the evolutionary one starts from `cost_model` (a file or an instance), else the shipped
    model if wanted, else an untrained one."""
    if name == "random":
        return RandomSearch(target=target, rng=rng)
    if name == "evolutionary":
        if isinstance(cost_model, Path):
            model = load_cost_model(cost_model)
        elif cost_model is not None:
            model = cost_model
        else:
            model = (pretrained_model() if pretrained else None) or make_cost_model()
        return EvolutionarySearch(target=target, rng=rng, model=model)
    raise AnsorError(f"unknown search policy '{name}': choose one of {', '.join(POLICIES)}")

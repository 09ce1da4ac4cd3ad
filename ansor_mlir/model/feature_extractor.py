"""Feature extractors: what the cost model sees of a candidate, as named fields.

An extractor turns candidates of one task into a `FeatureMatrix`: one row
per candidate, one column per named feature. A model stores the names it was
trained on and refuses a matrix with others, so a feature added, removed or
moved never silently shifts what a column means (Halide's `ScheduleFeatures`
are named fields for the same reason). Extractors are chosen by instance or by
name (`model.registry.make_feature_extractor`), as MetaSchedule's `FeatureExtractor.create`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from ansor_mlir.core.schedule import Candidate, Sketch
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.model.features import FEATURE_NAMES, FEATURE_VERSION, featurize_many


@dataclass(frozen=True)
class FeatureMatrix:
    """Features of candidates: `values[i, j]` is feature `names[j]` of candidate `i`."""

    names: tuple[str, ...]
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.values)

    def record(self, i: int) -> dict[str, float]:
        """Candidate `i`'s features by name."""
        return dict(zip(self.names, map(float, self.values[i]), strict=True))

    def column(self, name: str) -> np.ndarray:
        return self.values[:, self.names.index(name)]


@runtime_checkable
class FeatureExtractor(Protocol):
    """Turns candidates of one task into named features; `version` changes whenever a feature's meaning does."""

    name: str
    version: int

    @property
    def names(self) -> tuple[str, ...]: ...

    def extract(self, task: Task, sketches: dict[int, Sketch], candidates: list[Candidate],
                target: Target) -> FeatureMatrix:
        """One row per candidate (in order), columns `names`."""
        ...


@dataclass(frozen=True)
class KnobFeatures:
    """The knob-level features of `model.features`: tiles per Ansor level, footprints, sketch and target."""

    name: str = "knobs"
    version: int = FEATURE_VERSION

    @property
    def names(self) -> tuple[str, ...]:
        return FEATURE_NAMES

    def extract(self, task: Task, sketches: dict[int, Sketch], candidates: list[Candidate],
                target: Target) -> FeatureMatrix:
        return FeatureMatrix(self.names, featurize_many(task, sketches, candidates, target))

"""The cost model behind the search: a protocol, and the training data every model learns from.

A cost model scores candidates from their features (higher: predicted
faster) and learns from measurements grouped by task. One model is shared
across tasks; labels are per-task normalized throughput (best time of the task
/ this time, so the fastest known program of every task scores 1 and a
failure 0), which makes tasks of any size comparable. Models are chosen by
instance or by name (`model.registry`), as MetaSchedule's `CostModel.create`;
the XGBoost one (`model.xgb_model`) is the default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from ansor_mlir.model.feature_extractor import FeatureExtractor, FeatureMatrix


@dataclass
class TrainingSet:
    """Featurized measurements grouped by task, the model's training data."""

    features: list[np.ndarray] = field(default_factory=list)
    times: list[np.ndarray] = field(default_factory=list)  # seconds; inf for failures
    tasks: list[str] = field(default_factory=list)

    def add(self, task_key: str, features: np.ndarray | FeatureMatrix, times: np.ndarray) -> None:
        values = features.values if isinstance(features, FeatureMatrix) else features
        if len(times) == 0:
            return
        if task_key in self.tasks:
            i = self.tasks.index(task_key)
            self.features[i] = np.vstack([self.features[i], values])
            self.times[i] = np.concatenate([self.times[i], times])
        else:
            self.tasks.append(task_key)
            self.features.append(values)
            self.times.append(np.asarray(times, dtype=np.float64))

    def extend(self, other: TrainingSet, prefix: str = "") -> None:
        """Every task of `other` added (keys prefixed, to keep two hosts' samples of one task apart)."""
        for task, features, times in zip(other.tasks, other.features, other.times, strict=True):
            self.add(prefix + task, features, times)

    def subset(self, keep: set[str]) -> TrainingSet:
        out = TrainingSet()
        for task, features, times in zip(self.tasks, self.features, self.times, strict=True):
            if task in keep:
                out.add(task, features, times)
        return out

    @property
    def size(self) -> int:
        return sum(len(t) for t in self.times)

    def matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """Stacked features and normalized-throughput labels."""
        labels = [normalized_throughput(t) for t in self.times]
        return np.vstack(self.features), np.concatenate(labels)

    def groups(self) -> np.ndarray:
        """The task index of every row of `matrix` (query ids for ranking objectives)."""
        return np.concatenate([np.full(len(t), i, dtype=np.int64) for i, t in enumerate(self.times)])


def normalized_throughput(times: np.ndarray) -> np.ndarray:
    """best / time per sample of one task: 1 for the fastest, 0 for failures."""
    finite = times[np.isfinite(times)]
    if finite.size == 0:
        return np.zeros_like(times, dtype=np.float32)
    best = finite.min()
    with np.errstate(divide="ignore"):
        return np.where(np.isfinite(times), best / times, 0.0).astype(np.float32)


@runtime_checkable
class CostModel(Protocol):
    """Scores candidates from their features and learns from measurements."""

    name: str
    extractor: FeatureExtractor

    @property
    def trained(self) -> bool:
        """Whether scores mean anything: an untrained model scores at random (Ansor's cold start)."""
        ...

    def update(self, data: TrainingSet) -> None:
        """Learn from every measurement so far (from the pretrained start, for a model that has one)."""
        ...

    def predict(self, features: FeatureMatrix, rng: np.random.Generator | None = None) -> np.ndarray:
        """One score per row, higher for faster programs; random while untrained."""
        ...

    def save(self, path: Path) -> None: ...

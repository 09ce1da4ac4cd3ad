"""One task's search state, as MetaSchedule's `TuneContext` holds a task's: what it measured, which structures
it tried, which bests had their neighbours proposed, and the features of every candidate scored so far.

The search policy keeps one context per task and the cost model (shared by
all tasks) apart from them, so tasks tuned side by side never read each
other's state. Features are cached per candidate: evolution scores the same
elites and children over and over, and a candidate's features never change.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ansor_mlir.core.schedule import Candidate, MicroKernel, Sketch
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.model.feature_extractor import FeatureExtractor, FeatureMatrix

# Candidates whose features a context keeps; past it the cache starts over (a long search of one task).
MAX_CACHED = 200_000

Structure = tuple[int, str | None]


def structure(candidate: Candidate, by_index: dict[int, Sketch]) -> Structure:
    """What a candidate's sketch and its register tile shape fix, the knobs aside: (sketch index, `MRxNR` or None)."""
    kernel = by_index[candidate.sketch_index].step(MicroKernel)
    return candidate.sketch_index, candidate.choice(kernel.knobs[0]) if kernel is not None else None


@dataclass
class TaskContext:
    """The search state of one task."""

    task: Task
    by_index: dict[int, Sketch]
    # Measured (time, candidate), fastest first; failures are not kept as parents.
    history: list[tuple[float, Candidate]] = field(default_factory=list)
    # Structures (`structure`) the task has had candidates of (measured or proposed).
    structures_tried: set[Structure] = field(default_factory=set)
    # The best measured candidates whose `shape_neighbours` were proposed.
    neighboured: set[str] = field(default_factory=set)
    # Feature rows by candidate identity, for the extractor named in `cached_by`.
    cache: dict[str, np.ndarray] = field(default_factory=dict)
    cached_by: str = ""
    featurized: int = 0
    featurize_s: float = 0.0

    @property
    def best(self) -> Candidate | None:
        return self.history[0][1] if self.history else None

    def record(self, measured: list[tuple[float, Candidate]]) -> None:
        """Successful measurements with open knobs join the parents, fastest first."""
        self.history.extend((t, c) for t, c in measured if self.by_index[c.sketch_index].knobs)
        self.history.sort(key=lambda item: item[0])

    def features(self, candidates: list[Candidate], extractor: FeatureExtractor, target: Target) -> FeatureMatrix:
        """Features of `candidates` (in order), extracting only those not seen before."""
        key = f"{extractor.name}:{extractor.version}"
        if key != self.cached_by or len(self.cache) > MAX_CACHED:
            self.cache, self.cached_by = {}, key
        fresh = list({c.identity: c for c in candidates if c.identity not in self.cache}.values())
        if fresh:
            started = time.perf_counter()
            rows = extractor.extract(self.task, self.by_index, fresh, target).values
            self.featurize_s += time.perf_counter() - started
            self.featurized += len(fresh)
            self.cache.update(zip((c.identity for c in fresh), rows, strict=True))
        values = np.stack([self.cache[c.identity] for c in candidates]) if candidates else \
            np.zeros((0, len(extractor.names)), dtype=np.float32)
        return FeatureMatrix(extractor.names, values)

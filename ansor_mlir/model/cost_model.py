"""The learned cost model: XGBoost on program features, as in Ansor.

One model is shared across tasks. It regresses per-task normalized
throughput (best time of the task / this time, so the fastest known program
of every task scores 1 and a failure 0), and weighs samples by that label so
that the model is most accurate where it matters: among fast programs.
A pretrained model ships in the package as the warm start; online training
continues boosting from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import xgboost as xgb

from ansor_mlir.errors import AnsorError
from ansor_mlir.model.features import FEATURE_NAMES

# Close to Ansor's XGBModel parameters, with fewer rounds: we retrain after
# every measured batch and the data sets are small.
XGB_PARAMS = {
    "max_depth": 8,
    "gamma": 0.001,
    "min_child_weight": 0,
    "eta": 0.2,
    "subsample": 1.0,
    "objective": "reg:squarederror",
    "nthread": 1,
    "verbosity": 0,
    "seed": 0,
}
ROUNDS = 60
WARM_ROUNDS = 30
MIN_WEIGHT = 0.1
PRETRAINED = "cost_model.json"


@dataclass
class TrainingSet:
    """Featurized measurements grouped by task, the model's training data."""

    features: list[np.ndarray] = field(default_factory=list)
    times: list[np.ndarray] = field(default_factory=list)  # seconds; inf for failures
    tasks: list[str] = field(default_factory=list)

    def add(self, task_key: str, features: np.ndarray, times: np.ndarray) -> None:
        if len(times) == 0:
            return
        if task_key in self.tasks:
            i = self.tasks.index(task_key)
            self.features[i] = np.vstack([self.features[i], features])
            self.times[i] = np.concatenate([self.times[i], times])
        else:
            self.tasks.append(task_key)
            self.features.append(features)
            self.times.append(times)

    @property
    def size(self) -> int:
        return sum(len(t) for t in self.times)

    def matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """Stacked features and normalized-throughput labels."""
        labels = [normalized_throughput(t) for t in self.times]
        return np.vstack(self.features), np.concatenate(labels)


def normalized_throughput(times: np.ndarray) -> np.ndarray:
    """best / time per sample of one task: 1 for the fastest, 0 for failures."""
    finite = times[np.isfinite(times)]
    if finite.size == 0:
        return np.zeros_like(times, dtype=np.float32)
    best = finite.min()
    with np.errstate(divide="ignore"):
        return np.where(np.isfinite(times), best / times, 0.0).astype(np.float32)


@dataclass
class CostModel:
    """XGBoost regressor over `FEATURE_NAMES`; untrained models score at random."""

    booster: xgb.Booster | None = None
    base: xgb.Booster | None = None

    @property
    def trained(self) -> bool:
        return self.booster is not None

    def fit(self, data: TrainingSet) -> None:
        """Train on all data (continuing from the pretrained base when there is one)."""
        if data.size < 2:
            self.booster = self.base
            return
        x, y = data.matrix()
        matrix = xgb.DMatrix(x, label=y, weight=np.maximum(y, MIN_WEIGHT), feature_names=list(FEATURE_NAMES))
        if self.base is not None:
            self.booster = xgb.train(XGB_PARAMS, matrix, WARM_ROUNDS, xgb_model=self.base.copy())
        else:
            self.booster = xgb.train(XGB_PARAMS, matrix, ROUNDS)

    def predict(self, features: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """Predicted normalized throughput; random scores while untrained (as Ansor's cold start)."""
        if self.booster is None:
            rng = rng or np.random.default_rng(0)
            return rng.random(len(features)).astype(np.float32)
        return self.booster.predict(xgb.DMatrix(features, feature_names=list(FEATURE_NAMES)))

    def save(self, path: Path) -> None:
        if self.booster is None:
            raise AnsorError("cannot save an untrained cost model")
        self.booster.save_model(str(path))

    @staticmethod
    def load(path: Path) -> CostModel:
        if not path.is_file():
            raise AnsorError(f"cost model file {path} does not exist")
        booster = xgb.Booster()
        try:
            booster.load_model(str(path))
        except xgb.core.XGBoostError as exc:
            raise AnsorError(f"{path}: not a cost model ({str(exc).splitlines()[0]})") from None
        if booster.feature_names is not None and tuple(booster.feature_names) != FEATURE_NAMES:
            raise AnsorError(f"{path}: cost model was trained on other features; retrain it")
        return CostModel(booster=booster, base=booster)

    @staticmethod
    def pretrained() -> CostModel | None:
        """The model shipped in the package, or None if it is absent or stale."""
        path = resources.files("ansor_mlir") / "data" / PRETRAINED
        if not path.is_file():
            return None
        try:
            return CostModel.load(Path(str(path)))
        except AnsorError:
            return None


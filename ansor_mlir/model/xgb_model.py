"""The XGBoost cost model (Ansor's `XGBModel`), with a choice of training objective.

Objectives (`OBJECTIVES`):
  regression  squared error on per-task normalized throughput, each sample
              weighted by its label (Ansor's weighting: accuracy matters most
              among fast programs). Ansor's pack-sum loss sums per-statement
              predictions; our features give one row per program (the
              dispatch's statements folded in), where pack-sum is this loss.
  pairwise    XGBoost's `rank:pairwise`, pairs formed within each task only:
              the search only ever compares candidates of one task.
  lambdarank  XGBoost's `rank:ndcg` per task, its gain the throughput itself
              (`ndcg_exp_gain` off: labels need not be integer grades).

A pretrained model (`base`) is the warm start: `update` keeps boosting from
it on the run's own measurements alone (so they weigh as much as everything
the base learned from), every task weighted to the same total (a task
measured a few times counts as much as one measured hundreds of times), with
more rounds as measurements accumulate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xgboost as xgb

from ansor_mlir.errors import AnsorError
from ansor_mlir.model.cost_model import TrainingSet
from ansor_mlir.model.feature_extractor import FeatureExtractor, FeatureMatrix

OBJECTIVES = ("regression", "pairwise", "lambdarank")
_XGB_OBJECTIVE = {"regression": {"objective": "reg:squarederror"}, "pairwise": {"objective": "rank:pairwise"},
                  "lambdarank": {"objective": "rank:ndcg", "ndcg_exp_gain": False}}
# Ansor's XGBModel parameters with shallower trees and more, smaller steps, which fit the tasks trained on less
# closely and rank tasks held out of training better.
XGB_PARAMS = {
    "max_depth": 4,
    "gamma": 0.001,
    "min_child_weight": 1,
    "eta": 0.1,
    "subsample": 1.0,
    "nthread": 1,
    "verbosity": 0,
    "seed": 0,
}
ROUNDS = 300
# Rounds added to a pretrained model: `FINE_TUNE_MIN` at first, one more per `SAMPLES_PER_ROUND` measurements,
# at most `FINE_TUNE_MAX`: the more a task has been measured, the further its own data may move the ranking.
FINE_TUNE_MIN = 30
FINE_TUNE_MAX = 120
SAMPLES_PER_ROUND = 1
MIN_WEIGHT = 0.1
# Booster attributes a saved model carries, besides its feature names.
ATTRIBUTES = ("ansor_model", "objective", "extractor", "extractor_version")


def sample_weights(data: TrainingSet, labels: np.ndarray, per_task: bool) -> np.ndarray:
    """Ansor's label weights, each task's rows scaled to the mean task's total when `per_task`."""
    weights = np.maximum(labels, MIN_WEIGHT)
    if not per_task:
        return weights
    counts = np.array([len(t) for t in data.times], dtype=np.float64)
    return weights * np.repeat(counts.mean() / counts, counts.astype(np.int64))


@dataclass
class XGBModel:
    """XGBoost over an extractor's named features; untrained models score at random."""

    extractor: FeatureExtractor
    objective: str = "pairwise"
    booster: xgb.Booster | None = None
    base: xgb.Booster | None = None
    rounds: int = ROUNDS
    params: dict = field(default_factory=lambda: dict(XGB_PARAMS))
    # Fine-tuning a pretrained model (see the module docstring).
    fine_tune_min: int = FINE_TUNE_MIN
    fine_tune_max: int = FINE_TUNE_MAX
    samples_per_round: int = SAMPLES_PER_ROUND
    per_task_weights: bool = True
    name: str = "xgb"

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise AnsorError(f"unknown cost model objective '{self.objective}': choose one of {', '.join(OBJECTIVES)}")

    @property
    def trained(self) -> bool:
        return self.booster is not None

    def fine_tune_rounds(self, samples: int) -> int:
        return min(self.fine_tune_max, self.fine_tune_min + samples // self.samples_per_round)

    def matrix(self, data: TrainingSet, per_task: bool) -> xgb.DMatrix:
        x, y = data.matrix()
        names = list(self.extractor.names)
        if self.objective == "regression":
            return xgb.DMatrix(x, label=y, weight=sample_weights(data, y, per_task), feature_names=names)
        matrix = xgb.DMatrix(x, label=y, qid=data.groups(), feature_names=names)
        if per_task:  # ranking weights are per group: each task's pairs count as much as another's
            counts = np.array([len(t) for t in data.times], dtype=np.float64)
            matrix.set_weight(counts.mean() / counts)
        return matrix

    def update(self, data: TrainingSet) -> None:
        """Train on all data: from scratch, or boosting on from the pretrained base."""
        if data.size < 2:
            self.booster = self.base
            return
        params = {**self.params, **_XGB_OBJECTIVE[self.objective]}
        if self.base is not None:
            matrix = self.matrix(data, per_task=self.per_task_weights)
            self.booster = xgb.train(params, matrix, self.fine_tune_rounds(data.size), xgb_model=self.base.copy())
        else:
            self.booster = xgb.train(params, self.matrix(data, per_task=False), self.rounds)

    def predict(self, features: FeatureMatrix, rng: np.random.Generator | None = None) -> np.ndarray:
        """Predicted score per candidate; random scores while untrained (as Ansor's cold start)."""
        if features.names != self.extractor.names:
            raise ValueError(f"features {self.extractor.name} expected, got other columns")
        if self.booster is None:
            rng = rng or np.random.default_rng(0)
            return rng.random(len(features)).astype(np.float32)
        return self.booster.predict(xgb.DMatrix(features.values, feature_names=list(features.names)))

    def save(self, path: Path) -> None:
        if self.booster is None:
            raise AnsorError("cannot save an untrained cost model")
        self.booster.set_attr(ansor_model=self.name, objective=self.objective, extractor=self.extractor.name,
                              extractor_version=str(self.extractor.version))
        self.booster.save_model(str(path))

    @staticmethod
    def load(path: Path, extractor: FeatureExtractor) -> XGBModel:
        """A saved model, which continues from what it learned (its `base`)."""
        return XGBModel.from_booster(read_booster(path), extractor, path)

    @staticmethod
    def from_booster(booster: xgb.Booster, extractor: FeatureExtractor, path: Path) -> XGBModel:
        """The model of a booster read from `path`; refused when it was trained on other features than
        `extractor`'s."""
        stale = (booster.feature_names is None or tuple(booster.feature_names) != extractor.names
                 or booster.attr("extractor_version") not in (None, str(extractor.version)))
        if stale:
            raise AnsorError(f"{path}: cost model was trained on other features than the '{extractor.name}' "
                             f"extractor's; retrain it (tools/train_cost_model.py)")
        objective = booster.attr("objective") or "regression"
        return XGBModel(extractor, objective, booster=booster, base=booster)


def read_booster(path: Path) -> xgb.Booster:
    if not path.is_file():
        raise AnsorError(f"cost model file {path} does not exist")
    booster = xgb.Booster()
    try:
        booster.load_model(str(path))
    except xgb.core.XGBoostError as exc:
        raise AnsorError(f"{path}: not a cost model ({str(exc).splitlines()[0]})") from None
    return booster

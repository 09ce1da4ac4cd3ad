"""How good the cost model is, measured the way Ansor reports it.

All metrics are computed per task on held-out data (the model never saw the
task) and averaged over tasks:
  pairwise accuracy: share of program pairs with different times that the
      model orders correctly (Ansor: 0.851);
  top-k recall: share of the truly fastest k programs found among the
      model's top k (Ansor, k=30: 0.624);
  R^2 of predicted vs true normalized throughput (scikit-learn).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.metrics import r2_score

from ansor_mlir.model.cost_model import CostModel, TrainingSet, normalized_throughput


@dataclass(frozen=True)
class ModelQuality:
    pairwise_accuracy: float
    top_k_recall: float
    r2: float
    k: int
    tasks: int
    samples: int


def pairwise_accuracy(truth: np.ndarray, predicted: np.ndarray) -> float:
    """Share of pairs with distinct true scores that the prediction orders the same way."""
    dt = truth[:, None] - truth[None, :]
    dp = predicted[:, None] - predicted[None, :]
    pairs = dt > 0
    if not pairs.any():
        return float("nan")
    return float((dp[pairs] > 0).mean())


def top_k_recall(truth: np.ndarray, predicted: np.ndarray, k: int) -> float:
    """Share of the k best true programs that are among the k best predicted.

    Undefined (nan) for fewer than 2k programs, where picking k is no test at all.
    """
    if k == 0 or len(truth) < 2 * k:
        return float("nan")
    best_true = set(np.argsort(-truth, kind="stable")[:k].tolist())
    best_pred = set(np.argsort(-predicted, kind="stable")[:k].tolist())
    return len(best_true & best_pred) / k


def evaluate(model: CostModel, held_out: TrainingSet, k: int = 30) -> ModelQuality:
    """Per-task metrics of `model` on tasks it was not trained on, averaged over tasks."""
    pairs, recalls, truths, preds = [], [], [], []
    for features, times in zip(held_out.features, held_out.times, strict=True):
        truth = normalized_throughput(times)
        predicted = model.predict(features)
        pairs.append(pairwise_accuracy(truth, predicted))
        recalls.append(top_k_recall(truth, predicted, k))
        truths.append(truth)
        preds.append(predicted)
    truth_all, pred_all = np.concatenate(truths), np.concatenate(preds)
    return ModelQuality(
        pairwise_accuracy=float(np.nanmean(pairs)),
        top_k_recall=float("nan") if np.all(np.isnan(recalls)) else float(np.nanmean(recalls)),
        r2=float(r2_score(truth_all, pred_all)),
        k=k,
        tasks=len(held_out.tasks),
        samples=len(truth_all),
    )


def leave_one_out(groups: dict[str, TrainingSet], k: int = 30) -> dict[str, ModelQuality]:
    """Per group: a model trained on every other group, evaluated on this one."""
    out = {}
    for name, held in groups.items():
        train = TrainingSet()
        for other, data in groups.items():
            if other != name:
                for task, features, times in zip(data.tasks, data.features, data.times, strict=True):
                    train.add(task, features, times)
        if held.size == 0 or train.size == 0:
            continue
        model = CostModel()
        model.fit(train)
        out[name] = evaluate(model, held, k)
    return out

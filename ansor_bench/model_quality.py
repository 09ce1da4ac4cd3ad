"""How good a cost model is, measured the way Ansor and TenSet report it, on tasks it never saw.

Metrics are computed per task (a task's candidates on one CPU), over the
candidates that ran, and averaged over tasks:
  pairwise accuracy: share of pairs with different times that the model
      orders correctly (Ansor: 0.851);
  top-k recall: share of the truly fastest k programs found among the
      model's top k, defined for tasks with at least 2k programs (Ansor,
      k=30: 0.624);
  top-1 score: throughput of the model's first pick over the best's;
  rank correlation: Spearman's, of predicted scores and throughputs.
Splits hold tasks out whole (across every CPU they were measured on):
  seen kinds: folds of tasks whose operator kind other tasks share, each
      model trained on every other task (held-out shapes of seen kinds);
  unseen kinds: each operator kind held out in turn, trained on the others.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import spearmanr

from ansor_bench.datasets import TaskSamples
from ansor_mlir.model.cost_model import CostModel, TrainingSet, normalized_throughput
from ansor_mlir.model.feature_extractor import FeatureMatrix

ModelFactory = Callable[[], CostModel]
KS = (5, 30)
FOLDS = 4


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


def top1_score(truth: np.ndarray, predicted: np.ndarray) -> float:
    """Throughput of the predicted best program relative to the true best (1: the model picks the best)."""
    return float(truth[int(np.argmax(predicted))] / truth.max()) if len(truth) else float("nan")


def rank_correlation(truth: np.ndarray, predicted: np.ndarray) -> float:
    if len(truth) < 3 or np.ptp(truth) == 0 or np.ptp(predicted) == 0:
        return float("nan")
    return float(spearmanr(truth, predicted).statistic)


@dataclass(frozen=True)
class TaskQuality:
    """A model's metrics on one held-out task of one CPU."""

    host: str
    unit: str
    kind: str
    samples: int
    pairwise: float
    top1: float
    spearman: float
    top_k: tuple[float, ...]  # recall at each of `KS`


def task_quality(model: CostModel, samples: TaskSamples) -> TaskQuality | None:
    """Metrics over the task's candidates that ran; None with fewer than two."""
    ok = samples.ok
    if ok.sum() < 2:
        return None
    truth = normalized_throughput(samples.times[ok])
    predicted = model.predict(FeatureMatrix(model.extractor.names, samples.features[ok]))
    return TaskQuality(samples.host, samples.unit, samples.kind, int(ok.sum()), pairwise_accuracy(truth, predicted),
                       top1_score(truth, predicted), rank_correlation(truth, predicted),
                       tuple(top_k_recall(truth, predicted, k) for k in KS))


def nanmean(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return float(np.mean(finite)) if finite else float("nan")


@dataclass(frozen=True)
class Summary:
    """Means over tasks (each metric over the tasks where it is defined)."""

    tasks: int
    samples: int
    pairwise: float
    top1: float
    spearman: float
    top_k: tuple[float, ...]
    top_k_tasks: tuple[int, ...]

    @staticmethod
    def of(qualities: list[TaskQuality]) -> Summary:
        return Summary(len(qualities), sum(q.samples for q in qualities), nanmean([q.pairwise for q in qualities]),
                       nanmean([q.top1 for q in qualities]), nanmean([q.spearman for q in qualities]),
                       tuple(nanmean([q.top_k[i] for q in qualities]) for i in range(len(KS))),
                       tuple(sum(not math.isnan(q.top_k[i]) for q in qualities) for i in range(len(KS))))


def training_set(samples: list[TaskSamples]) -> TrainingSet:
    """Samples as the model's training data, one group per task and CPU (labels relative to that group's best)."""
    data = TrainingSet()
    for s in samples:
        data.add(f"{s.host}/{s.task_key}", s.features, s.times)
    return data


@dataclass(frozen=True)
class Split:
    """Tasks held out (`test`) and what the model is trained on (`train`)."""

    name: str
    train: tuple[TaskSamples, ...]
    test: tuple[TaskSamples, ...]


def _fold(unit: str, folds: int) -> int:
    return int(hashlib.sha256(unit.encode()).hexdigest(), 16) % folds


def seen_kind_splits(samples: list[TaskSamples], folds: int = FOLDS, hosts: set[str] | None = None) -> list[Split]:
    """Folds of the tasks whose kind has other tasks; each trained on every task outside the fold (any CPU)."""
    units_of: dict[str, set[str]] = {}
    for s in samples:
        units_of.setdefault(s.kind, set()).add(s.unit)
    shared = {u for units in units_of.values() if len(units) > 1 for u in units}
    splits = []
    for fold in range(folds):
        held = {u for u in shared if _fold(u, folds) == fold}
        test = tuple(s for s in samples if s.unit in held and (hosts is None or s.host in hosts))
        if test:
            splits.append(Split(f"fold {fold}", tuple(s for s in samples if s.unit not in held), test))
    return splits


def unseen_kind_splits(samples: list[TaskSamples], hosts: set[str] | None = None) -> list[Split]:
    """Each operator kind held out in turn, the model trained on every other kind."""
    splits = []
    for kind in sorted({s.kind for s in samples}):
        test = tuple(s for s in samples if s.kind == kind and (hosts is None or s.host in hosts))
        if test:
            splits.append(Split(kind, tuple(s for s in samples if s.kind != kind), test))
    return splits


def evaluate(factory: ModelFactory, splits: list[Split]) -> list[TaskQuality]:
    """Per held-out task, the metrics of a model trained on its split's training tasks."""
    out = []
    for split in splits:
        model = factory()
        model.update(training_set(list(split.train)))
        out += [q for s in split.test if (q := task_quality(model, s)) is not None]
    return out


def by_host(qualities: list[TaskQuality]) -> dict[str, Summary]:
    hosts = sorted({q.host for q in qualities})
    return {host: Summary.of([q for q in qualities if q.host == host]) for host in hosts}


@dataclass(frozen=True)
class FineTuned:
    """Metrics on a held-out task's remaining candidates after the model saw `shots` of its measurements."""

    shots: int
    pretrained: Summary  # fine-tuned from the model trained on the other tasks
    scratch: Summary  # trained on the shots alone


def fine_tuning(factory: ModelFactory, splits: list[Split], shots: tuple[int, ...], seed: int = 0,
                ) -> list[FineTuned]:
    """Online fine-tuning on a held-out task: the model trained on the split's training tasks, updated on
    `shots` of the task's own measurements (drawn at random), scored on the rest; beside it, a model trained
    on the shots alone (what the search has without a pretrained model)."""
    rng = np.random.default_rng(seed)
    results: dict[int, tuple[list[TaskQuality], list[TaskQuality]]] = {n: ([], []) for n in shots}
    for split in splits:
        base = factory()
        base.update(training_set(list(split.train)))
        for task in split.test:
            order = rng.permutation(len(task.times))
            for n in shots:
                if len(order) - n < 10:
                    continue
                seen, rest = _part(task, order[:n]), _part(task, order[n:])
                tuned = _warm(base)
                tuned.update(training_set([seen]))
                scratch = factory()
                scratch.update(training_set([seen]))
                for model, into in ((tuned, results[n][0]), (scratch, results[n][1])):
                    if (q := task_quality(model, rest)) is not None:
                        into.append(q)
    return [FineTuned(n, Summary.of(tuned), Summary.of(scratch)) for n, (tuned, scratch) in results.items()]


def _part(task: TaskSamples, rows: np.ndarray) -> TaskSamples:
    return TaskSamples(task.host, task.task_key, task.name, task.source, task.kind, task.features[rows],
                       task.times[rows], tuple(task.errors[i] for i in rows), tuple(task.messages[i] for i in rows))


def _warm(base: CostModel) -> CostModel:
    """A model starting from what `base` learned, as a pretrained model loaded from a file starts."""
    return replace(base, base=base.booster)


def failure_shares(samples: list[TaskSamples]) -> dict[str, dict[str, float]]:
    """Per operator kind: measured candidates, and the share that failed to compile, ran wrong or timed out."""
    out: dict[str, dict[str, float]] = {}
    for kind in sorted({s.kind for s in samples}):
        errors = [e for s in samples if s.kind == kind for e in s.errors]
        n = len(errors)
        out[kind] = {"measured": n,
                     "compile_error": sum(e in ("compile_error", "compile_timeout") for e in errors) / n,
                     "wrong_answer": sum(e == "wrong_answer" for e in errors) / n,
                     "other": sum(e not in ("none", "compile_error", "compile_timeout", "wrong_answer")
                                  for e in errors) / n}
    return out


def hard_limit_verdict(error: str, message: str) -> str:
    """Which of IREE's hard limits a build broke, by its error: `stack`, `vector`, or "" (none, or another)."""
    if error != "compile_error":
        return ""
    if "large vector sizes" in message:
        return "vector"
    if "stack" in message:
        return "stack"
    return ""


def limit_confusion(samples: list[TaskSamples], names: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """Per limit, the features' prediction (`alloc_stack_over`, `alloc_vector_over`) against the compiler's
    verdict on the measured candidates: true/false positives and negatives."""
    out = {}
    for limit in ("stack", "vector"):
        column = names.index(f"alloc_{limit}_over")
        counts = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
        for s in samples:
            for row, error, message in zip(s.features, s.errors, s.messages, strict=True):
                predicted = bool(row[column] > 0.5)
                broke = hard_limit_verdict(error, message) == limit
                counts[("t" if predicted == broke else "f") + ("p" if predicted else "n")] += 1
        out[limit] = counts
    return out

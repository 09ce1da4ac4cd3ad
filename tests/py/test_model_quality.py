"""The cost model's metrics and held-out splits, on small synthetic datasets whose answers are known."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from ansor_bench.datasets import TaskSamples
from ansor_bench.model_quality import (
    evaluate,
    failure_shares,
    fine_tuning,
    hard_limit_verdict,
    limit_confusion,
    pairwise_accuracy,
    seen_kind_splits,
    top1_score,
    top_k_recall,
    training_set,
    unseen_kind_splits,
)
from ansor_mlir.model.feature_extractor import FeatureMatrix
from ansor_mlir.model.registry import make_cost_model

NAMES = ("size", "noise", "alloc_stack_over", "alloc_vector_over")


class Synthetic:
    """A stand-in extractor for synthetic features: the model only reads its names."""

    name = "synthetic"
    version = 1
    names = NAMES

    def extract(self, task, sketches, candidates, target) -> FeatureMatrix:
        raise NotImplementedError


def task(kind: str, index: int, host: str = "cpu", n: int = 64, seed: int = 0) -> TaskSamples:
    """Candidates whose time grows with feature 0 (plus a little noise); one in eight failed to compile."""
    rng = np.random.default_rng(seed + index)
    x = rng.random((n, len(NAMES))).astype(np.float32)
    x[:, 2:] = 0
    times = (1 + 3 * x[:, 0] + 0.05 * rng.random(n)) * (index + 1)
    errors = ["none"] * n
    for i in range(0, n, 8):
        times[i], errors[i] = np.inf, "compile_error"
    x[0, 3] = 1  # predicted over the vector limit, and IREE agrees
    messages = ["error: One or more operations with large vector sizes" if e != "none" else "" for e in errors]
    return TaskSamples(host, f"{kind}{index}", f"{kind}_dispatch_{index}", f"{kind}({index})", kind, x, times,
                       tuple(errors), tuple(messages))


def test_ranking_metrics_on_known_orders():
    truth = np.array([1.0, 0.5, 0.25, 0.125])
    assert pairwise_accuracy(truth, truth) == 1.0 and pairwise_accuracy(truth, -truth) == 0.0
    assert top1_score(truth, np.array([0, 1, 0, 0])) == 0.5
    assert np.isnan(top_k_recall(truth, truth, 3))  # fewer than 2k programs: no test
    assert top_k_recall(np.arange(10.0), np.arange(10.0)[::-1], 5) == 0.0


def test_splits_hold_tasks_out_whole_and_kinds_out_entirely():
    samples = [task("matmul", i) for i in range(4)] + [task("conv", i) for i in range(3)] + [task("norm", 0)]
    samples += [task("matmul", 0, host="other")]
    for split in seen_kind_splits(samples):
        held = {s.unit for s in split.test}
        assert held and not held & {s.unit for s in split.train}
        assert {s.kind for s in split.test} <= {s.kind for s in split.train}
        assert "norm" not in {s.kind for s in split.test}  # a kind with one task is never a seen kind
    assert sorted(set().union(*({s.unit for s in split.test} for split in seen_kind_splits(samples)))) == sorted(
        {s.unit for s in samples if s.kind != "norm"})
    kinds = {split.name: split for split in unseen_kind_splits(samples)}
    assert set(kinds) == {"matmul", "conv", "norm"}
    assert all(split.name not in {s.kind for s in split.train} for split in kinds.values())


@pytest.mark.parametrize("objective", ["regression", "pairwise", "lambdarank"])
def test_a_model_ranks_held_out_tasks_of_a_learnable_dataset(objective):
    samples = [task(k, i) for k in ("matmul", "conv") for i in range(4)]
    qualities = evaluate(partial(make_cost_model, f"xgb-{objective}", Synthetic()), seen_kind_splits(samples))
    assert qualities and all(q.samples == 56 for q in qualities)  # failures are not ranked
    assert np.mean([q.pairwise for q in qualities]) > 0.85
    assert np.mean([q.top_k[0] for q in qualities]) > 0.5


def test_fine_tuning_reports_each_number_of_shots():
    samples = [task(k, i) for k in ("matmul", "conv") for i in range(3)]
    results = fine_tuning(partial(make_cost_model, "xgb-pairwise", Synthetic()), unseen_kind_splits(samples),
                          (0, 8, 16))
    assert [r.shots for r in results] == [0, 8, 16]
    assert all(r.pretrained.tasks == 6 for r in results)
    assert results[0].pretrained.pairwise > 0.9  # the other kind's tasks teach the same law
    assert results[2].scratch.tasks == 6 and results[2].scratch.pairwise > 0.6  # 16 measurements alone teach it


def test_failures_and_hard_limits_are_counted_per_kind():
    samples = [task("matmul", 0), task("conv", 0)]
    shares = failure_shares(samples)
    assert shares["matmul"]["compile_error"] == pytest.approx(1 / 8) and shares["matmul"]["measured"] == 64
    assert hard_limit_verdict("compile_error", "exceeded stack allocation limit") == "stack"
    assert hard_limit_verdict("wrong_answer", "large vector sizes") == ""
    confusion = limit_confusion(samples, NAMES)
    assert confusion["vector"] == {"tp": 2, "fp": 0, "fn": 14, "tn": 112}
    assert confusion["stack"]["tp"] == 0 and confusion["stack"]["tn"] == 128


def test_training_groups_are_per_task_and_cpu():
    data = training_set([task("matmul", 0), task("matmul", 0, host="other")])
    assert data.tasks == ["cpu/matmul0", "other/matmul0"] and data.size == 128

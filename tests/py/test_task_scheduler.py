"""Task schedulers as pure functions of the tasks' trials: round-robin, and Ansor's gradient scheduler
(first rounds, steepest descent of the estimated end-to-end latency, similar tasks, early stopping, eps-greedy),
and the budget that bounds them."""

from __future__ import annotations

import math
from dataclasses import replace

from ansor_mlir import api
from ansor_mlir.core.affine import AffineMap
from ansor_mlir.core.task import RootOp, Task
from ansor_mlir.database.records import read_records, task_history
from ansor_mlir.tuning.budget import Budget
from ansor_mlir.tuning.callbacks import TuningCallback
from ansor_mlir.tuning.task_result import TaskResult, estimated_latency
from ansor_mlir.tuning.task_scheduler import (
    GradientParams,
    GradientScheduler,
    RoundRobin,
    similar_groups,
    task_state,
)
from ansor_mlir.tuning.tuner import TuneOptions

BATCH = 4
GREEDY = GradientParams(eps_greedy=0.0)


def picks(left: list[int], batch: int) -> list[int]:
    """The order a loop measuring `batch` per pick would visit tasks in."""
    scheduler, order = RoundRobin(), []
    while (index := scheduler.next_task([], left)) is not None:
        assert left[index] > 0
        order.append(index)
        left[index] = max(0, left[index] - batch)
    return order


def test_tasks_take_turns_until_each_budget_is_spent():
    assert picks([16, 8, 24], batch=8) == [0, 1, 2, 0, 2, 2]


def test_tasks_with_nothing_left_are_skipped_and_nothing_left_stops():
    assert picks([0, 5, 0], batch=8) == [1]
    assert picks([0, 0], batch=8) == []
    assert picks([], batch=8) == []


def make_task(name: str, flops: int, weight: int = 1, kind: str = "linalg.matmul",
              shape: tuple[int, ...] = (64, 64, 64)) -> Task:
    """A task with only what the scheduler reads: its root op's kind and loop shape, FLOPs and weight."""
    root = RootOp(kind, shape, ("parallel", "parallel", "reduction"),
                  tuple(AffineMap.projection(3, dims) for dims in ((0, 2), (2, 1), (0, 1))),
                  ("tensor<64x64xf32>",) * 3, "f32", 4, ("arith.mulf", "arith.addf"))
    return Task(name, name, "", name, (), (), (kind,), root, 0, flops, weight)


def result(task: Task, times: list[float]) -> TaskResult:
    """A task's result after measuring `times` in order (IREE's default first; inf: a failed trial)."""
    out = TaskResult(task=task)
    for time_s in times:
        if math.isfinite(time_s) and (out.best_s is None or time_s < out.best_s):
            out.best_s = time_s
        out.trials += 1
        out.best_history.append(out.best_s if out.best_s is not None else math.inf)
    return out


def test_a_task_state_is_its_rounds_of_batch_trials_after_the_default():
    state = task_state([4.0, 4.0, 3.0, 3.0, 3.0, 2.0, 2.0], batch=4)
    # Round 0 is IREE's default; six search trials are two rounds, the second short.
    assert (state.rounds, state.history, state.trials_since_best) == (2, (4.0, 3.0, 2.0), 1)
    assert task_state([], batch=4).rounds == 0


def test_first_rounds_go_where_the_estimated_time_is_and_small_tasks_wait():
    """A task's first round competes with the others' next rounds: most estimated time first (a BERT layer at
    6 trials per task once left its two largest tasks, 60% of the time, untuned), and a task holding little of
    the time is not warmed up while a large task's next round promises more (ResNet-18 with Winograd: 36
    tasks, 320 trials, all of them spent warming up)."""
    tasks = [make_task(f"t{i}", 1_000_000, weight=i + 1) for i in range(4)]
    results = [result(tasks[0], [1.0] * 5), result(tasks[1], [1.0]), result(tasks[2], [1.0]), result(tasks[3], [0.5])]
    assert GradientScheduler(BATCH, GREEDY).next_task(results, [9, 9, 9, 9]) == 2  # weight 3 x 1.0
    results[3] = result(tasks[3], [0.6])
    assert GradientScheduler(BATCH, GREEDY).next_task(results, [9, 9, 0, 9]) == 3  # 4 x 0.6 > 2 x 1.0
    big, small = make_task("big", 10_000_000, kind="linalg.conv"), make_task("small", 10_000)
    # Four rounds of the big task at 10.0: its next is worth about 10.0 / 4 (the 1/t decay), more than the
    # small task's whole 0.5.
    results = [result(big, [40.0] + [10.0] * 16), result(small, [0.5])]
    assert GradientScheduler(BATCH, GREEDY).next_task(results, [9, 9]) == 0
    results = [result(big, [40.0] + [10.0] * 16), result(small, [5.0])]
    assert GradientScheduler(BATCH, GREEDY).next_task(results, [9, 9]) == 1
    # A task not measured at all (not even IREE's default) comes first.
    results = [result(big, [40.0] + [10.0] * 16), result(small, [])]
    assert GradientScheduler(BATCH, GREEDY).next_task(results, [9, 9]) == 1


def test_the_round_goes_where_weight_times_latency_is_largest():
    a, b = make_task("a", 10_000, kind="linalg.matmul"), make_task("b", 10_000_000, weight=3, kind="linalg.conv")
    # After one round each, the forward estimate is the whole best time: weight x latency decides.
    results = [result(a, [2.0, 2.0, 2.0, 2.0, 2.0]), result(b, [1.0, 1.0, 1.0, 1.0, 1.0])]
    assert GradientScheduler(BATCH, GREEDY).next_task(results, [8, 8]) == 1
    results = [result(a, [4.0] * 5), result(b, [1.0] * 5)]
    assert GradientScheduler(BATCH, GREEDY).next_task(results, [8, 8]) == 0
    assert GradientScheduler(BATCH, GREEDY).next_task(results, [8, 0]) == 0
    assert GradientScheduler(BATCH, GREEDY).next_task(results, [0, 0]) is None


def test_the_steeper_recent_slope_wins_at_equal_latency():
    a, b = make_task("a", 10_000), make_task("b", 10_000_000, kind="linalg.conv")
    flat = [2.0] + [2.0] * 12  # three rounds, no progress
    steep = [4.0] + [3.0] * 4 + [2.5] * 4 + [2.0] * 4  # three rounds, down by 2.0 over the window
    results = [result(a, flat), result(b, steep)]
    assert task_state(results[1].best_history, BATCH).history == (4.0, 3.0, 2.5, 2.0)
    assert GradientScheduler(BATCH, GREEDY).next_task(results, [8, 8]) == 1


def test_a_task_far_below_its_similar_tasks_speed_is_worth_more():
    fast, slow = make_task("fast", 1_000_000), make_task("slow", 1_000_000)
    other = make_task("other", 1_000_000, kind="linalg.conv")
    assert similar_groups([fast, slow, other], [task_state([1.0], BATCH)] * 3, 2.0) == [(0, 1), (0, 1), (2,)]
    # The same op and FLOPs in another shape is not similar: it may never reach the other's speed.
    reshaped = make_task("reshaped", 1_000_000, shape=(16, 256, 64))
    assert similar_groups([fast, reshaped], [task_state([1.0], BATCH)] * 2, 2.0) == [(0,), (1,)]
    # Ten rounds each, no recent progress: the 1/t decay alone favours the slowest task ...
    results = [result(fast, [1.0] * 41), result(slow, [1.5] * 41), result(other, [6.0] * 41)]
    assert GradientScheduler(BATCH, GREEDY).next_task(results, [8, 8, 8]) == 2
    # ... unless a task runs far below its similar task's speed: it could drop to beta x that speed's time.
    results = [result(fast, [1.0] * 41), result(slow, [5.0] * 41), result(other, [6.0] * 41)]
    assert GradientScheduler(BATCH, GREEDY).next_task(results, [8, 8, 8]) == 1


def test_a_task_that_stopped_improving_is_stopped_early():
    a, b = make_task("a", 10_000), make_task("b", 10_000_000, kind="linalg.conv")
    stuck = [1.0, 0.5] + [0.5] * 12  # the first search trial was its best: 12 trials since
    improving = [0.1] * 12 + [0.09]
    params = GradientParams(eps_greedy=0.0, early_stopping=12)
    results = [result(a, stuck), result(b, improving)]
    assert GradientScheduler(BATCH, params).next_task(results, [8, 8]) == 1
    assert GradientScheduler(BATCH, params).next_task(results, [8, 0]) is None
    assert GradientScheduler(BATCH, GradientParams(eps_greedy=0.0, early_stopping=13)).next_task(
        results, [8, 0]) == 0


def test_eps_greedy_picks_are_random_but_seeded_by_the_state():
    tasks = [make_task(f"t{i}", 10**i, kind=f"k{i}") for i in range(4)]

    def run(seed: int) -> list[int]:
        """A pick at each of 40 states that differ only in task 0's flat history (task 3 stays the steepest)."""
        scheduler = GradientScheduler(BATCH, GradientParams(eps_greedy=0.5), seed)
        return [scheduler.next_task([result(tasks[0], [1.0] * (9 + k)), *(result(t, [50.0 * i] * 9)
                                     for i, t in enumerate(tasks[1:], start=1))], [8] * 4) for k in range(40)]

    assert run(3) == run(3) != run(4)
    assert set(run(3)) == {0, 1, 2, 3}  # the steepest (task 3) mostly, others by chance
    assert run(3).count(3) > 20


def test_estimated_latency_is_the_weighted_sum_of_best_times():
    a, b = make_task("a", 10, weight=2), make_task("b", 10, weight=3, kind="k")
    assert estimated_latency([result(a, [1.0, 0.5]), result(b, [2.0])]) == 2 * 0.5 + 3 * 2.0
    assert estimated_latency([result(a, [1.0]), TaskResult(task=b)]) is None


def test_a_total_budget_is_shared_and_a_per_task_one_is_not():
    total = Budget.for_run(3, trials=20, trials_per_task=None, verify=2)
    assert (total.per_task, total.total, total.verify) == (14, 14, 2)
    assert total.left([10, 1, 1]) == [2, 2, 2]
    assert total.remaining([10, 1, 1]) == 2
    per_task = Budget.for_run(3, trials=20, trials_per_task=5, verify=2)
    assert per_task.left([5, 1, 3]) == [0, 2, 0] and per_task.remaining([3, 1, 1]) == 4
    # Too small a budget to set verification aside (each task would have only IREE's default): none is.
    assert Budget.for_run(3, trials=9, trials_per_task=None, verify=2) == Budget(9, 9, 0)
    assert Budget.for_run(3, trials=10, trials_per_task=None, verify=2) == Budget(4, 4, 2)
    assert Budget.for_run(3, trials=0, trials_per_task=3, verify=2) == Budget(3, 9, 0)
    # One task: the total is the per-task budget, as before.
    assert Budget.for_run(1, trials=6, trials_per_task=None, verify=2) == Budget(4, 4, 2)


TWO_MATMULS = """
func.func @two(%a: tensor<64x96xf32>, %b: tensor<96x128xf32>, %c: tensor<128x32xf32>) -> tensor<64x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<64x128xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<64x128xf32>) -> tensor<64x128xf32>
  %ab = linalg.matmul ins(%a, %b : tensor<64x96xf32>, tensor<96x128xf32>) outs(%f1 : tensor<64x128xf32>)
      -> tensor<64x128xf32>
  %e2 = tensor.empty() : tensor<64x32xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<64x32xf32>) -> tensor<64x32xf32>
  %abc = linalg.matmul ins(%ab, %c : tensor<64x128xf32>, tensor<128x32xf32>) outs(%f2 : tensor<64x32xf32>)
      -> tensor<64x32xf32>
  return %abc : tensor<64x32xf32>
}
"""


class Rounds(TuningCallback):
    def __init__(self) -> None:
        self.seen: list[tuple[int, int, float | None]] = []

    def on_round(self, results, index, left):
        self.seen.append((index, left, estimated_latency(results)))


def test_two_tasks_share_the_total_budget_and_a_resumed_run_has_the_same_state(tmp_path, target):
    log = tmp_path / "log.jsonl"
    rounds = Rounds()
    options = TuneOptions(trials=8, log=log, batch_size=2, verify=0, progress=False, policy="random")
    tuned = api.tune(TWO_MATMULS, target, options=options, callbacks=[rounds])
    results = tuned.tasks
    assert len(results) == 2 and sum(r.trials for r in results) == 8
    # IREE's defaults (2 trials), then three rounds by gradient, the first to the task of the most estimated
    # time; after every round the callbacks hear of the estimated end-to-end latency and what is left.
    defaults = [r.task.weight * r.best_history[0] for r in results]
    assert rounds.seen[0][0] == defaults.index(max(defaults))
    assert [left for _, left, _ in rounds.seen] == [4, 2, 0]
    assert rounds.seen[-1][2] == estimated_latency(results) == sum(r.task.weight * r.best_s for r in results)
    assert all(later <= earlier for (_, _, earlier), (_, _, later) in zip(rounds.seen, rounds.seen[1:], strict=False))
    # What the scheduler decides from, rebuilt from the log, is what the run had.
    records = read_records(log)
    rebuilt = [TaskResult(task=live.task) for live in results]
    for again in rebuilt:
        for record in task_history(records, target.key, again.task.key, [], target.fingerprint):
            again.account(record)
    scheduler = GradientScheduler(2, GradientParams(eps_greedy=0.5))
    assert scheduler.states(rebuilt) == scheduler.states(results)
    assert all(scheduler.next_task(rebuilt, left) == scheduler.next_task(results, left)
               for left in ([4, 4], [4, 0], [0, 4]))
    # Resuming with the same budget measures nothing more; a per-task budget of 5 tops each task up to 5.
    assert sum(r.trials for r in api.tune(TWO_MATMULS, target, options=options).tasks) == 8
    per_task = api.tune(TWO_MATMULS, target, options=replace(options, trials_per_task=5,
                                                             task_scheduler="round-robin")).tasks
    before = {r.task.key: r.trials for r in results}
    assert [r.trials for r in per_task] == [max(5, before[r.task.key]) for r in per_task]
    assert len(read_records(log)) == sum(r.trials for r in per_task)

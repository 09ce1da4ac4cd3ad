"""Which task gets the next batch of measurements (Ansor's task scheduler, paper section 6).

The tuning loop asks a `TaskScheduler` before every batch. The objective is
the model's estimated end-to-end latency, the sum over tasks of weight x
best latency (`task_result.estimated_latency`). `GradientScheduler` gives
the next round to the task whose next round is expected to lower it the
most; `RoundRobin` gives every task a round in turn.

The gradient scheduler keeps no state of its own: everything it decides
from is derived from each task's trials and best latencies
(`TaskResult.best_history`), which a resumed run rebuilds from the log in the
same order, and its random draws are seeded by the seed and the trials so
far, so a resumed run decides as the interrupted one would have.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ansor_mlir.core.task import Task
from ansor_mlir.errors import AnsorError
from ansor_mlir.tuning.task_result import TaskResult

SCHEDULERS = ("gradient", "round-robin")
# A similar task's rounds past which, if it still runs under 1/beta of its group's best speed, it leaves the group.
DISSIMILAR_AFTER_ROUNDS = 5


class TaskScheduler(Protocol):
    def next_task(self, results: Sequence[TaskResult], left: Sequence[int]) -> int | None:
        """The index of the task to measure next, or None to stop.

        `left[i]` is how many trials task `i` may still have; the loop sets it
        to 0 once the task's policy has nothing new to propose. A scheduler
        must never pick a task with nothing left.
        """
        ...


@dataclass
class RoundRobin:
    """Each task with trials left gets a batch in turn, in task order."""

    _last: int = -1

    def next_task(self, results: Sequence[TaskResult], left: Sequence[int]) -> int | None:
        count = len(left)
        for step in range(1, count + 1):
            index = (self._last + step) % count
            if left[index] > 0:
                self._last = index
                return index
        return None


@dataclass(frozen=True)
class GradientParams:
    """Ansor's constants: the weights of the backward and forward estimates, the window, eps-greedy."""

    alpha: float = 0.2
    beta: float = 2.0
    backward_window: int = 3
    eps_greedy: float = 0.05
    # Trials a task may go without improving before it stops for good (0: never).
    early_stopping: int = 0


@dataclass(frozen=True)
class TaskState:
    """A task's search as the scheduler sees it, derived from its trials alone.

    Round 0 is the measurement of IREE's default; round k >= 1 is the k-th
    `batch` of the task's search trials (the last may be short).
    `history[k]` is the best latency after round k.
    """

    rounds: int
    history: tuple[float, ...]
    trials_since_best: int

    @property
    def best(self) -> float:
        return self.history[-1] if self.history else math.inf


def task_state(best_history: Sequence[float], batch: int) -> TaskState:
    """The state of a task from the best latency after each of its trials, in the order measured."""
    if not best_history:
        return TaskState(0, (), 0)
    search = len(best_history) - 1
    rounds = -(-search // batch)
    history = (*best_history[0:search:batch], best_history[search])  # the best after each round
    best, since = best_history[-1], 0
    while since < search and best_history[-2 - since] == best:  # from the end: a long history costs nothing
        since += 1
    return TaskState(rounds, history, since)


def similarity_tag(task: Task) -> tuple:
    """Tasks with equal tags are similar: the same root op kind (name, body, element type) and loop shape.

    Ansor tags a task by its ops and log(FLOPs), which puts convolutions of
    other spatial and channel sizes but similar FLOPs together (ResNet-18's
    7x7x512 and 28x28x128 3x3 convolutions), though they reach very different
    speeds; the same shape with another fused epilogue (a residual add) is
    what can be expected to run alike.
    """
    root = task.root
    return (root.name, root.iterator_types, root.loop_extents, root.body_ops, root.element_type)


def similar_groups(tasks: Sequence[Task], states: Sequence[TaskState], beta: float) -> list[tuple[int, ...]]:
    """Per task, the indices of its similar tasks (itself included); a lone task's group is just itself.

    A task tuned more than `DISSIMILAR_AFTER_ROUNDS` rounds beyond every other
    member that still runs slower than 1/beta of the group's best speed is not
    really similar: it leaves the group (Ansor adjusts groups the same way).
    """
    members: dict[tuple, list[int]] = {}
    for index, task in enumerate(tasks):
        members.setdefault(similarity_tag(task), []).append(index)
    groups: list[tuple[int, ...]] = [(i,) for i in range(len(tasks))]
    for indices in members.values():
        if len(indices) < 2:
            continue
        speed = {i: tasks[i].flops / states[i].best for i in indices}
        best_speed = max(speed.values())
        kept = [i for i in indices if not (
            speed[i] < best_speed / beta
            and states[i].rounds > DISSIMILAR_AFTER_ROUNDS + max(states[j].rounds for j in indices if j != i))]
        for i in kept:
            groups[i] = tuple(kept)
    return groups


def gradient(task: Task, state: TaskState, group: Sequence[tuple[Task, TaskState]],
             params: GradientParams) -> float:
    """d(estimated latency)/d(rounds of this task): the more negative, the more a round of it is worth.

    w * (alpha * backward + (1 - alpha) * forward): backward is the slope of
    the best latency over the last `backward_window` rounds; forward is the
    optimistic next step, the smaller of the 1/t decay (the best latency
    shrinking as rounds t grow) and beta times the latency the task would
    have at its similar tasks' best speed.
    """
    best = state.best
    if not math.isfinite(best):
        return -math.inf
    window = params.backward_window
    backward = (state.history[-1] - state.history[-1 - window]) / window if state.rounds >= window else 0.0
    decayed = best - best / max(1, state.rounds)
    others = [t.flops / s.best for t, s in group if math.isfinite(s.best) and s.best > 0]
    similar = params.beta * task.flops / max(others) if len(group) > 1 and others and max(others) > 0 else math.inf
    forward = min(decayed, similar) - best
    return task.weight * (params.alpha * backward + (1 - params.alpha) * forward)


def stopped_early(state: TaskState, params: GradientParams) -> bool:
    """No improvement in the last `early_stopping` trials: the task's budget is better spent elsewhere."""
    return params.early_stopping > 0 and state.trials_since_best >= params.early_stopping


def gradients(tasks: Sequence[Task], states: Sequence[TaskState], params: GradientParams) -> list[float]:
    groups = similar_groups(tasks, states, params.beta)
    return [gradient(task, state, [(tasks[j], states[j]) for j in groups[i]], params)
            for i, (task, state) in enumerate(zip(tasks, states, strict=True))]


@dataclass
class GradientScheduler:
    """Ansor's gradient scheduler: steepest descent of the estimate, from IREE's default of every task.

    Ansor first gives every task a warm-up round; here a task's first round is worth its whole time, as its
    second is (`gradient`), so it competes with the others' next rounds: a model of many small tasks and a
    small budget does not spend it all warming up tasks that hold 0.1% of the time (ResNet-18 with Winograd:
    36 tasks, 320 trials). `batch` is the loop's batch size: one round of a task. With probability
    `eps_greedy` a random task is picked instead, and among equal gradients at
    random; tasks that stopped improving for `early_stopping` trials stop.
    """

    batch: int
    params: GradientParams = field(default_factory=GradientParams)
    seed: int = 0

    def states(self, results: Sequence[TaskResult]) -> list[TaskState]:
        return [task_state(r.best_history, self.batch) for r in results]

    def next_task(self, results: Sequence[TaskResult], left: Sequence[int]) -> int | None:
        states = self.states(results)
        live = [i for i, n in enumerate(left) if n > 0 and not stopped_early(states[i], self.params)]
        if not live:
            return None
        unmeasured = [i for i in live if not math.isfinite(states[i].best)]
        if unmeasured:
            return unmeasured[0]
        # Drawn from the seed and the trials so far: the same state, the same draw, resumed or not.
        rng = random.Random(f"{self.seed}:{sum(r.trials for r in results)}")
        if rng.random() < self.params.eps_greedy:
            return rng.choice(live)
        grads = gradients([r.task for r in results], states, self.params)
        steepest = min(grads[i] for i in live)
        ties = [i for i in live if grads[i] == steepest]
        return ties[0] if len(ties) == 1 else rng.choice(ties)


def make_scheduler(name: str, batch: int, seed: int = 0, early_stopping: int = 0) -> TaskScheduler:
    """The scheduler named by the `task-scheduler` option."""
    if name == "gradient":
        return GradientScheduler(batch, GradientParams(early_stopping=early_stopping), seed)
    if name == "round-robin":
        return RoundRobin()
    raise AnsorError(f"unknown task scheduler '{name}': choose one of {', '.join(SCHEDULERS)}")

"""Round-robin: every task with trials left gets a batch in turn; none is picked with nothing left."""

from __future__ import annotations

from ansor_mlir.tuning.task_scheduler import RoundRobin


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

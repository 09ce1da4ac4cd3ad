"""A run's budget scales with its tasks, the console says what it got, and what twice as much is forecast to bring."""

from __future__ import annotations

from test_task_scheduler import make_task, result

from ansor_mlir import api
from ansor_mlir.tuning.budget_outlook import (
    DEFAULT_TRIALS_PER_TASK,
    TIME_BOUND_TRIALS_PER_TASK,
    budget_note,
    forecast,
    outlook,
    scaled_trials,
)
from ansor_mlir.tuning.options import TuneOptions

BATCH = 2


def test_a_run_without_trials_gets_a_budget_scaled_to_its_tasks():
    assert TuneOptions().trials is None
    assert scaled_trials(None, None, 23) == 23 * DEFAULT_TRIALS_PER_TASK
    assert scaled_trials(None, 1800.0, 23) == 23 * TIME_BOUND_TRIALS_PER_TASK  # the time runs out first
    assert scaled_trials(40, 1800.0, 23) == 40 and scaled_trials(0, None, 3) == 0


def test_the_budget_note_says_what_the_run_got_and_from_where():
    assert budget_note(None, None, None, 23) == (f"budget: {23 * DEFAULT_TRIALS_PER_TASK} trials for 23 tasks (the "
                                                 f"default, {DEFAULT_TRIALS_PER_TASK} per task; set trials or a "
                                                 "time budget to change it)")
    assert budget_note(None, None, 1800.0, 2) == ("budget: as many trials for 2 tasks as fit in the time budget, "
                                                  "stopping after 30.0 min")
    assert budget_note(64, None, None, 1) == "budget: 64 trials for 1 task (64 per task on average)"
    assert budget_note(None, 8, 45.0, 3) == "budget: 8 trials per task (24 for 3 tasks), stopping after 45 s"


def test_a_task_still_improving_is_forecast_to_gain_and_a_converged_one_is_not():
    falling = result(make_task("a", 10**6), [4.0, 3.0, 3.0, 2.5, 2.5, 2.0, 2.0])  # 3 rounds of 2, still falling
    flat = result(make_task("b", 10**6), [2.0] + [1.0] * 8)  # no gain in its last 3 rounds
    assert forecast([flat], BATCH, 6) == 1.0
    ahead = forecast([falling], BATCH, 6)
    assert 1.0 <= ahead < 2.0  # never below half of the best time now
    # The extra rounds go where they save the most end-to-end time: the falling task, weighted.
    both = forecast([falling, flat], BATCH, 6)
    assert both == ahead + 1.0
    heavy = result(make_task("c", 10**6, weight=3), [4.0, 3.0, 3.0, 2.5, 2.5, 2.0, 2.0])
    assert forecast([heavy], BATCH, 6) == 3 * ahead


def test_the_outlook_compares_now_with_twice_the_budget():
    flat = result(make_task("b", 10**6), [2.0] + [1.0] * 8)  # no gain in its last 3 rounds
    flat.default_s = 2.0
    view = outlook([flat], BATCH)
    assert view is not None and view.trials == 9 and view.forecast_s == view.estimate_s == 1.0
    assert "2.00x" in view.note() and "stopped moving" in view.note()
    falling = result(make_task("a", 10**6), [4.0, 3.0, 3.0, 2.5, 2.5, 2.0, 2.0])
    falling.default_s = 4.0
    note = outlook([falling], BATCH).note()
    assert "twice the budget (14 trials) is forecast to bring about" in note and "not a measurement" in note
    assert outlook([result(make_task("n", 10**6), [])], BATCH) is None


class Notes:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_note(self, message: str) -> None:
        self.seen.append(message)

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None


def test_a_tune_says_its_budget_and_its_outlook(small_mm, tmp_path):
    notes = Notes()
    api.tune(small_mm, trials=3, log=tmp_path / "l.jsonl", progress=False, verify=0, callbacks=[notes])
    assert "budget: 3 trials for 1 task (3 per task on average)" in notes.seen, notes.seen
    assert any(n.startswith("estimated end-to-end ") and "after 3 trials" in n for n in notes.seen), notes.seen

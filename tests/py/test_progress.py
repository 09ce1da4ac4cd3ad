"""The results table says why a task is left to IREE's default."""

import dataclasses

from ansor_mlir.tuning.progress import applied
from ansor_mlir.tuning.task_result import TaskResult


def test_a_default_task_says_why(small_task):
    only_default = TaskResult(task=small_task, default_s=1e-3, trials=1)
    assert applied(only_default) == "IREE default (no candidate measured: raise --trials)"
    failed = TaskResult(task=small_task, default_s=1e-3, trials=4, failures=3,
                        errors={"compile_error": 2, "wrong_answer": 1})
    assert applied(failed) == "IREE default (all 3 candidates failed, most with compile_error)"
    slower = TaskResult(task=small_task, default_s=1e-3, trials=5, successes=4)
    assert applied(slower) == "IREE default (none of 4 candidates faster)"
    untunable = dataclasses.replace(small_task, default_config=None, codegen_ops=())
    assert applied(TaskResult(task=untunable)) == "IREE default (no sketch applies to this dispatch)"

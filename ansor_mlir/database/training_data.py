"""Cost-model training data from tuning logs.

A record names its task by key and carries its candidate's trace and knob
values (older records: a sketch index, upgraded against the regenerated
sketches); with the task (re-extracted from the same module) it featurizes
back into exactly the program that was measured.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.database.measure_record import Record
from ansor_mlir.database.queries import task_history
from ansor_mlir.model.cost_model import TrainingSet
from ansor_mlir.model.feature_extractor import FeatureExtractor
from ansor_mlir.model.registry import make_feature_extractor
from ansor_mlir.space.sketch_rules import generate_sketches


def task_samples(records: list[Record], task: Task, target: Target,
                 extractor: FeatureExtractor | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(features, seconds) of one task's records for this target; failures time as inf."""
    extractor = extractor or make_feature_extractor()
    sketches = generate_sketches(task, target)
    mine = [r for r in task_history(records, target.key, task.key, sketches) if r.candidate.sketch_index >= 0]
    features = extractor.extract(task, {s.index: s for s in sketches}, [r.candidate for r in mine], target)
    times = np.array([r.result.median_s if r.ok else np.inf for r in mine], dtype=np.float64)
    return features.values, times


def training_set(records: list[Record], tasks: list[Task], target: Target,
                 extractor: FeatureExtractor | None = None) -> TrainingSet:
    """All records of the given tasks, grouped per task."""
    data = TrainingSet()
    for task in tasks:
        features, times = task_samples(records, task, target, extractor)
        data.add(task.key, features, times)
    return data


def tasks_by_module(modules: dict[str, str], target: Target,
                    rewrite_sets: Iterable[tuple[str, ...]] = ((),)) -> dict[str, list[Task]]:
    """Tasks of each named linalg module (e.g. suite workloads), keyed by that name: those of the module as
    given and after each set of program rewrites in `rewrite_sets` (the sets the records name: a record of a
    rewritten program has the rewritten task's key, which the module as given may not have)."""
    from ansor_mlir.frontend.program_rewrites import rewrite_program
    from ansor_mlir.frontend.task_extraction import extract_tasks

    tasks: dict[str, list[Task]] = {}
    for name, text in modules.items():
        seen: dict[str, Task] = {}
        for rewrites in dict.fromkeys(((), *rewrite_sets)):
            program = rewrite_program(text, rewrites, name).text if rewrites else text
            for task in extract_tasks(program, target, name):
                seen.setdefault(task.key, task)
        tasks[name] = list(seen.values())
    return tasks


def grouped_sets(
    records: list[Record], groups: dict[str, list[Task]], target: Target, extractor: FeatureExtractor | None = None
) -> dict[str, TrainingSet]:
    """One training set per group (workload), holding the records of its tasks."""
    return {name: training_set(records, tasks, target, extractor) for name, tasks in groups.items()}

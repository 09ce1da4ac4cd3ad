"""Resolve a candidate into the concrete loop structure its program has.

`resolve` is the one place where decisions become tile sizes: the strategy
emitter, the validity checks (annotation) and the features all read the
`Resolved` structure, never raw knob values, so they describe the same
program. For a transform sketch the loops are the root's as IREE's codegen
sees it (`Task.codegen_ops`); for a pipeline sketch, the task's root op. The
trace's steps take part through their kinds' resolve hooks (`steps`): the DAG
they tile, the loops they keep unit, the tiles they fix, what they add.
"""

from __future__ import annotations

from dataclasses import replace

from ansor_mlir.core.schedule import (
    LEVEL_KIND,
    REDUCTION,
    SPATIAL,
    Candidate,
    Family,
    Sketch,
    is_register_level,
    tile_knobs,
)
from ansor_mlir.core.task import IreeConfig, Task
from ansor_mlir.space.dag import Dag, task_dag, unit_register_dims
from ansor_mlir.space.resolved import Resolved
from ansor_mlir.space.resolved import has_interior_unit_dim as has_interior_unit_dim
from ansor_mlir.space.resolved import input_tiles as input_tiles
from ansor_mlir.steps.configure_pipeline import level_config
from ansor_mlir.steps.registry import kinds_of


def sketch_dag(sketch: Sketch, task: Task) -> Dag | None:
    """The DAG a transform sketch tiles: the task's, as the trace's steps rewrite it (an implicit GEMM's)."""
    dag = task_dag(task)
    for kind, step in kinds_of(sketch):
        if dag is None:
            return None
        dag = kind.rewrite_dag(step, dag)
    return dag


def fixed_tiles(sketch: Sketch, candidate: Candidate, extents: tuple[int, ...], iterator_types: tuple[str, ...]
                ) -> dict[str, dict[int, int]]:
    """Tiles the trace's steps set on the root's loops, per level, whatever the tile knobs say."""
    fixed: dict[str, dict[int, int]] = {}
    for kind, step in kinds_of(sketch):
        for level, tiles in kind.fixed_tiles(step, candidate, extents, iterator_types).items():
            fixed[level] = {**fixed.get(level, {}), **tiles}
    return fixed


def resolve(sketch: Sketch, candidate: Candidate, task: Task) -> Resolved:
    """The concrete loop structure a candidate of a sketch stands for."""
    if sketch.family is Family.TRANSFORM:
        dag = sketch_dag(sketch, task)
        if dag is None:
            raise ValueError(f"task {task.key} has no codegen structure for a transform strategy")
        return _resolve_strategy(sketch, candidate, task, dag)
    return _resolve_pipeline(sketch, candidate, task)


def _resolve_strategy(sketch: Sketch, candidate: Candidate, task: Task, dag: Dag) -> Resolved:
    """Root tiles per level as the strategy tiles them: a level re-tiles a loop only where its tile changes
    (workgroups always), and loops the steps keep unit (`StepKind.forced_units`) get unit register tiles; then
    each step adds what it means (`StepKind.refine`) and its stack buffers."""
    root = dag.ops[dag.root]
    values = dict(candidate.values)
    steps = kinds_of(sketch)
    forced = unit_register_dims(root)
    for kind, step in steps:
        forced = kind.forced_units(step, root, forced)
    fixed = fixed_tiles(sketch, candidate, root.extents, root.iterator_types)
    current = list(root.extents)
    per_level: dict[str, list[int]] = {}
    for level in sketch.levels:
        sizes = [0] * len(root.extents)
        chosen = [(knob.dim, values[knob.name][knob.levels.index(level)]) for knob in tile_knobs(sketch.knobs)
                  if knob.of_root and knob.name in values and level in knob.levels]
        for dim, size in chosen + list(fixed.get(level, {}).items()):
            if size != current[dim] or level == "distribution":
                sizes[dim] = size
                current[dim] = size
        if is_register_level(level) and LEVEL_KIND[level] == (
            REDUCTION if level == "vector_reduction" else SPATIAL
        ):
            for d in forced:
                kind = REDUCTION if root.iterator_types[d] == "reduction" else SPATIAL
                if LEVEL_KIND[level] == kind and current[d] > 1:
                    sizes[d] = 1
                    current[d] = 1
        per_level[level] = sizes
    consumer_tiles: dict[int, dict[int, int]] = {}
    for knob in tile_knobs(sketch.knobs):
        if knob.op is not None:
            consumer_tiles.setdefault(knob.op, {})[knob.dim] = values[knob.name][0]
    resolved = Resolved(sketch, candidate, task, dag, root.extents, root.iterator_types, per_level, current,
                        consumer_tiles)
    for step_kind, step in steps:
        resolved = step_kind.refine(step, resolved)
    stack = sum(step_kind.stack_bytes(step, resolved) for step_kind, step in steps)
    return replace(resolved, step_stack_bytes=stack) if stack else resolved


def _resolve_pipeline(sketch: Sketch, candidate: Candidate, task: Task) -> Resolved:
    """Tiles per IREE level, as the configuration names them (IREE's own for sketch zero)."""
    config = render_config(sketch, candidate, task)
    extents = task.root.loop_extents
    per_level = {name: list(sizes[: len(extents)]) + [0] * (len(extents) - len(sizes)) for name, sizes in config.levels}
    register = list(extents)
    for name in sketch.levels or tuple(per_level):
        for d, size in enumerate(per_level.get(name, ())):
            if size:
                register[d] = min(size, register[d])
    return Resolved(sketch, candidate, task, task_dag(task), extents, task.root.iterator_types, per_level, register)


def render_config(sketch: Sketch, candidate: Candidate, task: Task) -> IreeConfig:
    """The IREE configuration a candidate stands for: the one a step of the trace decides (IREE's own, a GPU
    launch, a CPU pipeline's tiles), else the tiles per level.

    For a transform sketch this is a summary (its tile sizes per level, over
    the loops of the root as IREE's codegen sees it); the program itself is
    `codegen.transform_strategy.render_strategy`.
    """
    root = task.root
    extents, iterator_types = root.loop_extents, root.iterator_types
    if sketch.family is Family.TRANSFORM and task.codegen_ops and sketch.knobs:
        dag = sketch_dag(sketch, task)
        if dag is not None:
            extents, iterator_types = dag.ops[dag.root].extents, dag.ops[dag.root].iterator_types
    fixed = fixed_tiles(sketch, candidate, extents, iterator_types) if sketch.knobs else {}
    for kind, step in kinds_of(sketch):
        config = kind.config(step, sketch, candidate, task, fixed)
        if config is not None:
            return config
    return level_config(sketch, candidate, len(extents), fixed)

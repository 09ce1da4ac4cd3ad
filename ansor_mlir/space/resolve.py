"""Resolve a candidate into the concrete loop structure its program has.

The strategy emitter, the validity checks and the features read tile sizes
from here, never from raw knob values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod

from ansor_mlir.core.schedule import (
    LEVEL_KIND,
    REDUCTION,
    SPATIAL,
    TRANSFORM_FAMILY,
    Candidate,
    Sketch,
    tile_knobs,
)
from ansor_mlir.core.task import IreeConfig, LinalgOpInfo, Task
from ansor_mlir.space.dag import (
    Dag,
    _dims_of,
    _map_results,
    dim_map,
    forced_unit_dims,
    operands_along,
    output_dims,
    task_dag,
    vector_loop,
)
from ansor_mlir.space.decisions import is_consumer_knob


@dataclass(frozen=True)
class _Tiles:
    """Root tile sizes per level, resolved from a candidate (0 = not tiled at that level)."""

    per_level: dict[str, list[int]]
    register: list[int]


def resolve_tiles(sketch: Sketch, candidate: Candidate, dag: Dag) -> _Tiles:
    root = dag.ops[dag.root]
    values = dict(candidate.values)
    forced = forced_unit_dims(sketch.rules, root)
    current = list(root.extents)
    per_level: dict[str, list[int]] = {}
    for level in sketch.levels:
        sizes = [0] * len(root.extents)
        for knob in tile_knobs(sketch.knobs):
            if knob.name in values and level in knob.levels and not is_consumer_knob(knob.name):
                size = values[knob.name][knob.levels.index(level)]
                if size != current[knob.dim] or level == "distribution":
                    sizes[knob.dim] = size
                    current[knob.dim] = size
        if level.startswith("vector_") and LEVEL_KIND[level] == (
            REDUCTION if level == "vector_reduction" else SPATIAL
        ):
            for d in forced:
                kind = REDUCTION if root.iterator_types[d] == "reduction" else SPATIAL
                if LEVEL_KIND[level] == kind and current[d] > 1:
                    sizes[d] = 1
                    current[d] = 1
        per_level[level] = sizes
    return _Tiles(per_level, current)



def tile_above_register(sketch: Sketch, tiles: _Tiles, root: LinalgOpInfo) -> list[int]:
    """The root's tile per loop above the register levels (cache, else workgroup tile, else whole loop)."""
    current = list(root.extents)
    for level in sketch.levels:
        if not level.startswith("vector_"):
            current = [size or extent for size, extent in zip(tiles.per_level[level], current, strict=True)]
    return current



def register_tiles(sketch: Sketch, candidate: Candidate, task: Task) -> tuple[int, ...]:
    """The root's innermost tile per loop (what one vector op covers)."""
    dag = task_dag(task)
    assert dag is not None
    return tuple(resolve_tiles(sketch, candidate, dag).register)


def output_tiles(sketch: Sketch, candidate: Candidate, task: Task) -> list[tuple[int, ...]]:
    """The innermost tile of every vectorized op's output, in the output's dimension order.

    The root's register tile, and per consumer its loops mapped to the root's
    (or its own knob, or the whole extent); fills mirror the root's output.
    """
    dag = task_dag(task)
    assert dag is not None
    values = dict(candidate.values)
    reg = resolve_tiles(sketch, candidate, dag).register
    tiles = [tuple(reg[d] if d is not None else 1 for d in output_dims(dag.ops[dag.root]))]
    for c in dag.consumers:
        op = dag.ops[c]
        sizes = list(op.extents)
        for mine, theirs in dim_map(dag.ops, dag.root, c).items():
            sizes[mine] = reg[theirs]
        for knob in tile_knobs(sketch.knobs):
            if knob.name.startswith(f"c{c}d"):
                sizes[knob.dim] = values[knob.name][0]
        tiles.append(tuple(sizes[d] if d is not None else 1 for d in output_dims(op)))
    return tiles


def input_tiles(sketch: Sketch, candidate: Candidate, task: Task) -> list[tuple[int, ...]]:
    """The root's register tile of every input, in the input's dimension order.

    A compound access (`d1 * 2 + d4`) spans more than one element when any of
    its loops does (counted as 2: only unit or not matters); constants span 1.
    """
    dag = task_dag(task)
    assert dag is not None
    root = dag.ops[dag.root]
    reg = resolve_tiles(sketch, candidate, dag).register
    tiles = []
    for amap in root.indexing_maps[: root.num_inputs]:
        tile = []
        for expr in _map_results(amap):
            loops = _dims_of(expr)
            if re.fullmatch(r"d\d+", expr):
                tile.append(reg[loops[0]])
            else:
                tile.append(2 if any(reg[d] > 1 for d in loops) else 1)
        tiles.append(tuple(tile))
    return tiles


def _span(expr: str, sizes: list[int]) -> int:
    """Elements an access `d1 * 2 + d4` (or `d3`, or a constant) covers over loop tiles `sizes`."""
    span = 1
    for term in expr.split("+"):
        loops = _dims_of(term)
        if loops:
            coefficient = prod(int(c) for c in re.findall(r"(?<![d\w])(\d+)", term))
            span += coefficient * (sizes[loops[0]] - 1)
    return span


def padded_panel_bytes(sketch: Sketch, candidate: Candidate, task: Task) -> int:
    """Bytes of the root's operand tiles padded outside its reduction loop (stack buffers).

    A padded root is padded along its parallel loops before its reduction
    loops are tiled, so every input tile spans whole reduction loops there.
    """
    dag = task_dag(task)
    assert dag is not None
    root = dag.ops[dag.root]
    reg = resolve_tiles(sketch, candidate, dag).register
    sizes = [reg[d] if it == "parallel" else root.extents[d] for d, it in enumerate(root.iterator_types)]
    total = 0
    for amap in root.indexing_maps:
        total += prod(_span(expr, sizes) for expr in _map_results(amap))
    return total * task.root.element_bytes


def packed_panel_bytes(sketch: Sketch, candidate: Candidate, task: Task) -> int:
    """Bytes of the packed input panels (stack buffers): each input indexed by the vector loop, over the
    root's tile above the register levels."""
    dag = task_dag(task)
    assert dag is not None
    root = dag.ops[dag.root]
    extents = tile_above_register(sketch, resolve_tiles(sketch, candidate, dag), root)
    inputs = [dims for i, dims in operands_along(root, vector_loop(root)) if i < root.num_inputs]
    return sum(prod(extents[d[0]] for d in dims) for dims in inputs) * task.root.element_bytes


def workgroup_output_elements(sketch: Sketch, candidate: Candidate, task: Task) -> int:
    """Elements of the root's output tile per workgroup (a stack buffer when consumers run after the root)."""
    dag = task_dag(task)
    assert dag is not None
    root = dag.ops[dag.root]
    dist = resolve_tiles(sketch, candidate, dag).per_level.get("distribution", [0] * len(root.extents))
    return prod((dist[d] or root.extents[d]) if d is not None else 1 for d in output_dims(root))


def has_interior_unit_dim(tile: tuple[int, ...]) -> bool:
    """A unit dimension after a non-unit one (`[1, 2, 1, 16]`, `[4, 1]`).

    Folding unit dims rank-reduces such a tile with `extract_slice` /
    `insert_slice`; MLIR's `insert_slice(transfer_write)` folding (run by
    `vectorize_children_and_apply_patterns`) then rewrites the write with a
    minor-identity map on the full-rank tensor, which drops all but the first
    row of the tile: wrong answers, not a compile error (IREE 3.13). Only
    leading unit dims fold correctly.
    """
    first = next((i for i, size in enumerate(tile) if size > 1), len(tile))
    return any(size == 1 for size in tile[first:])


def register_bytes(sketch: Sketch, candidate: Candidate, task: Task) -> tuple[int, int]:
    """(accumulator bytes, operand tile bytes) of the root's register tile."""
    dag = task_dag(task)
    assert dag is not None
    root = dag.ops[dag.root]
    reg = register_tiles(sketch, candidate, task)
    parallel = prod(reg[d] for d in range(len(reg)) if root.iterator_types[d] == "parallel")
    total = prod(reg)
    return parallel * 4, total * 4


def render_config(sketch: Sketch, candidate: Candidate, task: Task) -> IreeConfig:
    """The IREE configuration a candidate stands for.

    For a transform sketch this is a summary (its tile sizes per level, over
    the loops of the root as IREE's codegen sees it); the program itself is
    `codegen.transform_strategy.render_strategy`.
    """
    if sketch.fixed_config is not None:
        return sketch.fixed_config
    if not sketch.knobs:
        return IreeConfig(pipeline=sketch.pipeline, levels=())
    values = dict(candidate.values)
    loops = len(task.root.loop_extents)
    if sketch.family == TRANSFORM_FAMILY and task.codegen_ops:
        dag = task_dag(task)
        loops = len(dag.ops[dag.root].extents) if dag else loops
    levels = []
    for level in sketch.levels:
        sizes = [0] * loops
        for knob in tile_knobs(sketch.knobs):
            if level in knob.levels and knob.name == f"d{knob.dim}" and knob.dim < loops:
                sizes[knob.dim] = values[knob.name][knob.levels.index(level)]
        levels.append((level, tuple(sizes)))
    return IreeConfig(pipeline=sketch.pipeline, levels=tuple(levels))

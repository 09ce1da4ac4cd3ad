"""Features of a complete program, for the learned cost model.

A candidate's program is fully determined by its task (loop extents,
iterator types, indexing maps, element type), its sketch and its knob values:
the tile sizes per level fix the loop nest after tiling, and the indexing
maps give exactly which slice of each operand a tile touches. So the loop
structure is derived analytically here (exact for affine-map tiling) rather
than by compiling, which keeps featurizing at tens of thousands of
candidates per second.

The three tiling levels of Ansor's `SSRSRS` structure are read as
  workgroup: `distribution` (reduction loops untiled),
  cache:     `cache_parallel` / `cache_reduction` (default: the level above),
  register:  `vector_common_parallel`/`vector_inner_parallel`/`vector_reduction`.

Feature list (`FEATURE_NAMES` holds the exact order; sizes are log2(1+x)):
  task:     flops, loop count, parallel/reduction loop counts, parallel and
            reduction iteration volume, element bytes, fused op count,
            innermost loop is a reduction
  per level (wg, cache, reg):
            parallel and reduction tile volume, trip count of the level's
            loops inside its parent, input and output bytes touched by one
            tile, arithmetic intensity (flops per byte touched), bytes
            touched relative to L1 and L2, fits-in-L1 and fits-in-L2 flags,
            worst input reuse (flops per element touched)
  parallelism: workgroup count, workgroups per core, load balance
            (busy fraction of cores in the last wave), unique bytes touched
            by all workgroups relative to compulsory bytes
  vector:   innermost parallel register tile in vector lanes, whether it is a
            lane multiple, accumulator vector registers, register tile
            volume in vectors (unroll), innermost reduction register tile
  sketch:   pipeline family, IREE pipeline one-hot, has a cache level, is
            IREE's default, is an rfactor / padded / packed sketch, one-hot of each built-in
            categorical knob (consumer fusion, cache write, contraction and
            reduction lowering), other categorical knobs hashed into slots
  target:   vector bytes, L1, L2, cores
"""

from __future__ import annotations

import zlib
from math import ceil, log2, prod

import numpy as np

from ansor_mlir.core.affine import AffineMap
from ansor_mlir.core.schedule import Candidate, ChoiceKnob, Family, Pack, Pad, Rfactor, Sketch
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.space.decisions import CACHE_WRITE, FUSION, LOWERING, REDUCTION_LOWERING
from ansor_mlir.space.resolve import resolve

# Version 2: tiles come from `space.resolve` (window loops the strategy keeps unit are unit here too).
# Version 3: `partial_tile_share`.
FEATURE_VERSION = 3
LEVELS = ("wg", "cache", "reg")
PIPELINES = ("DoubleTilingExpert", "Mmt4dTilingExpert", "ConvTileAndDecomposeExpert", "Default")
# Categorical knobs the built-in rules use get one-hot features; knobs of
# user-registered rules are hashed into a few shared slots.
KNOWN_CHOICES = (FUSION, CACHE_WRITE, LOWERING, REDUCTION_LOWERING)
CHOICE_SLOTS = 2

_PER_LEVEL = (
    "par_volume", "red_volume", "trips", "in_bytes", "out_bytes", "intensity",
    "bytes_per_l1", "bytes_per_l2", "fits_l1", "fits_l2", "min_reuse",
)
FEATURE_NAMES: tuple[str, ...] = (
    ("task_flops", "task_loops", "task_par_loops", "task_red_loops", "task_par_volume", "task_red_volume",
     "task_elem_bytes", "task_ops", "task_inner_is_red")
    + tuple(f"{lv}_{name}" for lv in LEVELS for name in _PER_LEVEL)
    + ("workgroups", "wg_per_core", "load_balance", "wg_traffic_ratio")
    + ("vec_inner_lanes", "vec_lane_multiple", "vec_acc_regs", "vec_unroll", "vec_inner_red")
    + ("partial_tile_share",)
    + ("family_transform",) + tuple(f"pipeline_{p}" for p in PIPELINES)
    + ("has_cache_level", "is_default", "is_rfactor", "is_padded", "is_packed")
    + tuple(f"{k.name}_{option}" for k in KNOWN_CHOICES for option in k.options)
    + tuple(f"choice_{i}" for i in range(CHOICE_SLOTS))
    + ("target_vector_bytes", "target_l1", "target_l2", "target_cores")
)


def _lg(x: float) -> float:
    return log2(1.0 + max(0.0, x))


def footprint(amap: AffineMap, tile: tuple[int, ...]) -> int:
    """Elements of an operand touched by one tile of the iteration space."""
    return amap.footprint(tile)


def featurize(task: Task, sketch: Sketch, candidate: Candidate, target: Target) -> list[float]:
    """The feature vector of one candidate, in `FEATURE_NAMES` order."""
    resolved = resolve(sketch, candidate, task)
    extents = resolved.extents
    reduction = [t == "reduction" for t in resolved.iterator_types]
    elem = task.root.element_bytes
    # Transform strategies tile the root as IREE codegen sees it (which may have a re-inserted unit batch
    # loop); IREE pipelines tile the task's root op.
    op_maps = resolved.root.indexing_maps if sketch.family is Family.TRANSFORM else task.root.indexing_maps
    num_inputs = resolved.root.num_inputs if sketch.family is Family.TRANSFORM else len(op_maps) - 1
    inputs = list(op_maps[:num_inputs])
    output = op_maps[num_inputs]
    maps = [*inputs, output]
    plan = resolved.level_tiles()
    flops_per_point = task.flops / max(1, prod(extents))

    feats: list[float] = [
        _lg(task.flops), len(extents), len(extents) - sum(reduction), sum(reduction),
        _lg(prod(e for e, r in zip(extents, reduction, strict=True) if not r)),
        _lg(prod(e for e, r in zip(extents, reduction, strict=True) if r)),
        elem, len(task.ops), float(bool(reduction) and reduction[-1]),
    ]
    parent = extents
    whole = 1.0
    for level in LEVELS:
        tile = plan[level]
        par_vol = prod(t for t, r in zip(tile, reduction, strict=True) if not r)
        red_vol = prod(t for t, r in zip(tile, reduction, strict=True) if r)
        trips = prod(ceil(p / t) for p, t in zip(parent, tile, strict=True))
        in_elems = [footprint(m, tile) for m in inputs]
        out_bytes = footprint(output, tile) * elem
        in_bytes = sum(in_elems) * elem
        touched = in_bytes + out_bytes
        tile_flops = flops_per_point * par_vol * red_vol
        feats += [
            _lg(par_vol), _lg(red_vol), _lg(trips), _lg(in_bytes), _lg(out_bytes),
            _lg(tile_flops / max(1, touched)),
            _lg(touched / target.l1_bytes), _lg(touched / target.l2_bytes),
            float(touched <= target.l1_bytes), float(touched <= target.l2_bytes),
            _lg(min((tile_flops / max(1, e) for e in in_elems), default=0.0)),
        ]
        whole *= prod((p // t) * t / p for p, t in zip(parent, tile, strict=True))
        parent = tile

    wg = plan["wg"]
    groups = resolved.workgroups
    cores = max(1, target.threads)
    waves = ceil(groups / cores)
    compulsory = sum(footprint(m, extents) for m in maps) * elem
    wg_touched = groups * sum(footprint(m, wg) for m in maps) * elem
    feats += [_lg(groups), _lg(groups / cores), groups / (waves * cores), _lg(wg_touched / max(1, compulsory))]

    reg = plan["reg"]
    lanes = target.vector_lanes(elem)
    par_dims = [d for d, r in enumerate(reduction) if not r]
    inner_par = reg[par_dims[-1]] if par_dims else 1
    reg_par = prod(reg[d] for d in par_dims)
    reg_red = [reg[d] for d, r in enumerate(reduction) if r]
    feats += [
        _lg(inner_par / lanes), float(inner_par % lanes == 0),
        _lg(reg_par * elem / target.vector_bytes),
        _lg(prod(reg) * elem / target.vector_bytes),
        _lg(reg_red[-1] if reg_red else 0),
        # Iterations in partial tiles (a peeled row tile, a padded register tile): they run slower code, which
        # the shape alone does not show (CHANGELOG.md, limits).
        1.0 - whole,
    ]

    feats.append(float(sketch.family is Family.TRANSFORM))
    feats += [float(sketch.pipeline == p) for p in PIPELINES]
    feats += [float("cache_parallel" in sketch.levels or "cache_reduction" in sketch.levels),
              float(sketch.is_default), float(sketch.has(Rfactor)), float(sketch.has(Pad)), float(sketch.has(Pack))]
    values = dict(candidate.values)
    for known in KNOWN_CHOICES:
        chosen = values.get(known.name) if any(k == known for k in sketch.knobs) else None
        feats += [float(chosen is not None and chosen[0] == i) for i in range(len(known.options))]
    choices = [0.0] * CHOICE_SLOTS
    for knob in sketch.knobs:
        if isinstance(knob, ChoiceKnob) and knob not in KNOWN_CHOICES and knob.name in values:
            slot = zlib.crc32(knob.name.encode()) % CHOICE_SLOTS
            choices[slot] = (values[knob.name][0] + 1) / len(knob.options)
    feats += choices
    feats += [_lg(target.vector_bytes), _lg(target.l1_bytes), _lg(target.l2_bytes), float(target.cores)]
    return feats


def featurize_many(
    task: Task, sketches: dict[int, Sketch], candidates: list[Candidate], target: Target
) -> np.ndarray:
    """Feature matrix (one row per candidate) for one task."""
    rows = [featurize(task, sketches[c.sketch_index], c, target) for c in candidates]
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), len(FEATURE_NAMES))

"""Features of the program IREE compiles: the resolved loop nest, read as Ansor and Halide read theirs.

Each candidate is read after `space.resolve` (the tiled structure the
strategy emitter and the validity checks read too), never from its knob
values alone. Per tiling level (workgroup, cache, register: Ansor's `SSRSRS`
levels) and per buffer (the two largest inputs and the output), the
features say how much one tile touches and how often it reuses what it
touches (Ansor's per-buffer access features, Halide's per-realization
bytes); of the innermost loop, how many vector FMAs and vector loads one
reduction step issues and how many accumulator registers it holds; of the
allocations, the stack buffers and the largest vector against IREE's limits;
of the trace, its step kinds and choices; of the target, its vector width,
registers, caches, cores and FMA issue, so one model serves several CPUs.

Features are a name -> value mapping in the fixed order of `NAMES`; sizes
are log2(1 + x) (a tile of 1 and one of 2**20 differ by 20, not a million).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from math import ceil, log2, prod

import numpy as np

from ansor_mlir.core.affine import AffineMap
from ansor_mlir.core.fma_throughput import fma_throughput
from ansor_mlir.core.schedule import Candidate, ChoiceKnob, Family, Sketch
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.model.feature_extractor import FeatureMatrix
from ansor_mlir.space.decisions import CACHE_WRITE, FUSION, LOWERING, REDUCTION_LOWERING
from ansor_mlir.space.limits import limits
from ansor_mlir.space.resolve import resolve
from ansor_mlir.space.resolved import Resolved, workgroup_stack_bytes

# Version 1: the first program features. Version 2: the work estimates (`est_*`). Version 3: no vector estimate
# for IREE pipelines.
VERSION = 3
LEVELS = ("wg", "cache", "reg")
BUFFERS = ("in0", "in1", "out")
PIPELINES = ("DoubleTilingExpert", "Mmt4dTilingExpert", "ConvTileAndDecomposeExpert", "Default")
# Step kinds with a feature of their own; a kind added later counts in `step_other` until the features know it
# (so adding a step kind does not make the shipped model stale).
STEP_FEATURES = ("cache-write", "decompose", "fuse-consumers", "implicit-gemm", "iree-default", "lower-contraction",
                 "lower-reduction", "micro-kernel", "pack", "pad", "pad-rows", "rfactor", "tile-and-fuse",
                 "configure-pipeline")
KNOWN_CHOICES = (FUSION, CACHE_WRITE, LOWERING, REDUCTION_LOWERING)
CHOICE_SLOTS = 2
CACHE_LINE = 64
TRANSCENDENTAL = ("math.exp", "math.log", "math.tanh", "math.sqrt", "math.rsqrt", "math.erf", "arith.divf")

_TASK = ("flops", "loops", "par_loops", "red_loops", "par_volume", "red_volume", "elem_bytes", "consumers",
         "inner_is_red", "body_ops", "transcendental", "pads_input")
_BUFFER = ("total_bytes", "vec_broadcast", "vec_contiguous", "vec_strided", "reuse_loops")
_PER_LEVEL = ("par_volume", "red_volume", "trips", "instances", "bytes", "intensity", "bytes_per_l1",
              "bytes_per_l2", "fits_l1", "fits_l2", "partial")
_PER_LEVEL_BUFFER = ("bytes", "reuse", "lines")
_VECTOR = ("lanes", "lane_multiple", "fma_per_step", "loads_per_step", "fma_per_load", "acc_regs", "acc_reg_share",
           "spills", "volume_vectors", "inner_red", "partial_sums", "unroll_k")
_PARALLEL = ("workgroups", "per_core", "load_balance", "traffic_ratio")
_ALLOC = ("stack_bytes", "stack_share", "stack_over", "vector_max_bytes", "vector_share", "vector_over",
          "packed_bytes", "padded_bytes", "im2col_bytes", "padded_input_bytes")
_ANNOTATION = ("consumers_inner", "deferred_rows", "loop_reordered")
# The program's work relative to the task's least (so comparable across tasks of any size): vector FMAs issued
# over the fewest that compute its flops, vector loads per flop, bytes refilled into each cache level per flop,
# register-tile steps (loop trips of the innermost body) per flop.
_ESTIMATE = ("vector_op_ratio", "loads_per_flop", "l1_fill_per_flop", "l2_fill_per_flop", "steps_per_flop")
_TARGET = ("vector_bytes", "registers", "l1", "l2", "l3", "cores", "threads", "fma_flops_per_cycle")

NAMES: tuple[str, ...] = (
    tuple(f"task_{n}" for n in _TASK)
    + tuple(f"{b}_{n}" for b in BUFFERS for n in _BUFFER)
    + tuple(f"{lv}_{n}" for lv in LEVELS for n in _PER_LEVEL)
    + tuple(f"{lv}_{b}_{n}" for lv in LEVELS for b in BUFFERS for n in _PER_LEVEL_BUFFER)
    + tuple(f"vec_{n}" for n in _VECTOR)
    + tuple(f"par_{n}" for n in _PARALLEL)
    + tuple(f"alloc_{n}" for n in _ALLOC)
    + tuple(f"ann_{n}" for n in _ANNOTATION)
    + tuple(f"est_{n}" for n in _ESTIMATE)
    + ("family_transform", "is_default") + tuple(f"pipeline_{p}" for p in PIPELINES)
    + tuple(f"step_{k}" for k in STEP_FEATURES) + ("step_other",)
    + tuple(f"{k.name}_{option}" for k in KNOWN_CHOICES for option in k.options)
    + tuple(f"choice_{i}" for i in range(CHOICE_SLOTS))
    + tuple(f"target_{n}" for n in _TARGET)
)


def _lg(x: float) -> float:
    return log2(1.0 + max(0.0, x))


@dataclass(frozen=True)
class _Loops:
    """What the features read of the root: its loops and its buffers' maps, as the program tiles them."""

    extents: tuple[int, ...]
    reduction: tuple[bool, ...]
    inputs: tuple[AffineMap, ...]
    output: AffineMap
    body_ops: tuple[str, ...]

    @property
    def buffers(self) -> tuple[AffineMap | None, ...]:
        """The two largest inputs (None where there are fewer) and the output: `BUFFERS`."""
        largest = sorted(self.inputs, key=lambda m: -m.footprint(self.extents))[:2]
        return (*largest, *([None] * (2 - len(largest))), self.output)

    @property
    def vector_loop(self) -> int | None:
        """The loop vectors run along: the output's innermost loop."""
        dims = self.output.result_dims()
        return dims[-1] if dims else None


def _loops(resolved: Resolved, strategy: bool, task: Task) -> _Loops:
    # Transform strategies tile the root as IREE codegen sees it; IREE pipelines tile the task's root op.
    if strategy:
        root = resolved.root
        maps, inputs, body = root.indexing_maps, root.num_inputs, root.body_ops
    else:
        maps, body = task.root.indexing_maps, task.root.body_ops
        inputs = len(maps) - 1
    reduction = tuple(t == "reduction" for t in resolved.iterator_types)
    return _Loops(tuple(resolved.extents), reduction, tuple(maps[:inputs]), maps[inputs], tuple(body))


def _lines(amap: AffineMap, tile: tuple[int, ...], elem: int) -> int:
    """Cache lines one tile touches of a buffer: its innermost span in whole lines, times the other spans."""
    spans = amap.spans(tile)
    if not spans:
        return 1
    return prod(spans[:-1]) * ceil(spans[-1] * elem / CACHE_LINE)


def _access(amap: AffineMap | None, vector: int | None) -> tuple[float, float, float]:
    """How a vector along `vector` reads the buffer: broadcast (the loop does not index it), contiguous (it
    indexes the innermost dimension alone, with stride 1), strided (anything else)."""
    if amap is None or vector is None:
        return 0.0, 0.0, 0.0
    if vector not in amap.dims():
        return 1.0, 0.0, 0.0
    last = amap.results[-1] if amap.results else None
    contiguous = last is not None and last.dims() == (vector,) and last.coefficient(vector) == 1
    inner_elsewhere = any(vector in e.dims() for e in amap.results[:-1])
    return (0.0, 1.0, 0.0) if contiguous and not inner_elsewhere else (0.0, 0.0, 1.0)


def _largest_vector(resolved: Resolved, elem: int) -> int:
    """Bytes of the largest vector a transform strategy holds: the root's register tile or a vectorized op's
    output tile. (An IREE pipeline picks its vectors itself: the features do not guess them.)"""
    return max([prod(resolved.register), *(prod(t) for t in resolved.output_tiles)]) * elem


@dataclass(frozen=True)
class _Static:
    """What every candidate of one sketch shares: the root's loops and buffers, and the features of the task,
    the trace and the target (computed once per sketch, not per candidate)."""

    loops: _Loops
    strategy: bool
    par_dims: tuple[int, ...]
    red_dims: tuple[int, ...]
    compulsory_bytes: int
    features: dict[str, float]


def _static(task: Task, sketch: Sketch, target: Target, resolved: Resolved) -> _Static:
    # The dispatch's DAG as the strategy tiles it: what transform strategies add (stack buffers, fused consumers).
    strategy = sketch.family is Family.TRANSFORM and resolved.dag is not None
    loops = _loops(resolved, strategy, task)
    elem = task.root.element_bytes
    extents, reduction = loops.extents, loops.reduction
    par_dims = tuple(d for d, r in enumerate(reduction) if not r)
    red_dims = tuple(d for d, r in enumerate(reduction) if r)
    body = loops.body_ops
    f: dict[str, float] = dict(
        task_flops=_lg(task.flops), task_loops=len(extents), task_par_loops=len(par_dims),
        task_red_loops=len(red_dims), task_par_volume=_lg(prod(extents[d] for d in par_dims)),
        task_red_volume=_lg(prod(extents[d] for d in red_dims)), task_elem_bytes=elem,
        task_consumers=len(resolved.dag.consumers) if resolved.dag is not None else len(task.ops) - 1,
        task_inner_is_red=float(bool(reduction) and reduction[-1]), task_body_ops=len(body),
        task_transcendental=sum(op in TRANSCENDENTAL for op in body), task_pads_input=float(task.pads_input))
    parallel_loops = {d for d in par_dims if extents[d] > 1}
    for name, amap in zip(BUFFERS, loops.buffers, strict=True):
        total = amap.footprint(extents) * elem if amap is not None else 0
        broadcast, contiguous, strided = _access(amap, loops.vector_loop)
        f.update({f"{name}_total_bytes": _lg(total), f"{name}_vec_broadcast": broadcast,
                  f"{name}_vec_contiguous": contiguous, f"{name}_vec_strided": strided,
                  f"{name}_reuse_loops": len(parallel_loops - amap.dims()) if amap is not None else 0})
    f.update(family_transform=float(sketch.family is Family.TRANSFORM), is_default=float(sketch.is_default))
    f.update({f"pipeline_{p}": float(sketch.pipeline == p) for p in PIPELINES})
    kinds = [step.kind for step in sketch.steps]
    f.update({f"step_{k}": float(k in kinds) for k in STEP_FEATURES})
    f["step_other"] = float(sum(k not in STEP_FEATURES for k in kinds))
    fma = fma_throughput(target.resolved_cpu or target.cpu, target.cpu_features)
    f.update(target_vector_bytes=_lg(target.vector_bytes), target_registers=target.vector_registers,
             target_l1=_lg(target.l1_bytes), target_l2=_lg(target.l2_bytes), target_l3=_lg(target.l3_bytes),
             target_cores=float(target.cores), target_threads=float(target.threads),
             target_fma_flops_per_cycle=float(fma.f32_flops_per_cycle) if fma else 0.0)
    compulsory = sum(m.footprint(extents) for m in (*loops.inputs, loops.output)) * elem
    return _Static(loops, strategy, par_dims, red_dims, compulsory, f)


def program_features(task: Task, sketch: Sketch, candidate: Candidate, target: Target,
                     static: _Static | None = None) -> dict[str, float]:
    """One candidate's features by name, in `NAMES` order (`static`: its sketch's shared part, if known)."""
    resolved = resolve(sketch, candidate, task)
    static = static or _static(task, sketch, target, resolved)
    loops, strategy, par_dims, red_dims = static.loops, static.strategy, static.par_dims, static.red_dims
    elem = task.root.element_bytes
    extents, reduction = loops.extents, loops.reduction
    flops_per_point = task.flops / max(1, prod(extents))
    buffers = loops.buffers
    vector = loops.vector_loop
    f = dict(static.features)

    plan = resolved.level_tiles()
    parent = extents
    for level in LEVELS:
        tile = plan[level]
        par_vol = prod(tile[d] for d in par_dims)
        red_vol = prod(tile[d] for d in red_dims)
        tile_flops = flops_per_point * par_vol * red_vol
        touched = 0
        for name, amap in zip(BUFFERS, buffers, strict=True):
            elems = amap.footprint(tile) if amap is not None else 0
            touched += elems * elem
            f[f"{level}_{name}_bytes"] = _lg(elems * elem)
            f[f"{level}_{name}_reuse"] = _lg(par_vol * red_vol / elems) if elems else 0.0
            f[f"{level}_{name}_lines"] = _lg(_lines(amap, tile, elem)) if amap is not None else 0.0
        partial = 1.0 - prod((p // t) * t / p for p, t in zip(parent, tile, strict=True))
        f.update({f"{level}_par_volume": _lg(par_vol), f"{level}_red_volume": _lg(red_vol),
                  f"{level}_trips": _lg(prod(ceil(p / t) for p, t in zip(parent, tile, strict=True))),
                  f"{level}_instances": _lg(prod(ceil(e / t) for e, t in zip(extents, tile, strict=True))),
                  f"{level}_bytes": _lg(touched), f"{level}_intensity": _lg(tile_flops / max(1, touched)),
                  f"{level}_bytes_per_l1": _lg(touched / target.l1_bytes),
                  f"{level}_bytes_per_l2": _lg(touched / target.l2_bytes),
                  f"{level}_fits_l1": float(touched <= target.l1_bytes),
                  f"{level}_fits_l2": float(touched <= target.l2_bytes), f"{level}_partial": partial})
        parent = tile

    reg = plan["reg"]
    lanes = target.vector_lanes(elem)
    inner = reg[vector] if vector is not None else 1
    reg_par = prod(reg[d] for d in par_dims)
    vector_fmas = ceil(reg_par / lanes)
    # One reduction step of the register tile: the inputs' footprint with every reduction loop at 1, in vector
    # loads (contiguous along the vector loop) or scalar broadcasts.
    step = tuple(1 if r else t for t, r in zip(reg, reduction, strict=True))
    loads = 0
    for amap in loops.inputs:
        elems = amap.footprint(step)
        loads += ceil(elems / lanes) if vector is not None and vector in amap.dims() else elems
    acc_elements = resolved.accumulator_elements if strategy else reg_par
    acc_regs = acc_elements * elem / target.vector_bytes
    registers = max(1, target.vector_registers)
    unrolled = resolved.unrolled_k_level
    f.update(vec_lanes=_lg(inner / lanes), vec_lane_multiple=float(inner % lanes == 0),
             vec_fma_per_step=_lg(vector_fmas), vec_loads_per_step=_lg(loads),
             vec_fma_per_load=vector_fmas / max(1, loads), vec_acc_regs=_lg(acc_regs),
             vec_acc_reg_share=acc_regs / registers, vec_spills=float(acc_regs + 2 > registers),
             vec_volume_vectors=_lg(prod(reg) * elem / target.vector_bytes),
             vec_inner_red=_lg(reg[red_dims[-1]] if red_dims else 0),
             vec_partial_sums=float(bool(resolved.partial_sum_dims)), vec_unroll_k=_lg(unrolled[1] if unrolled else 0))

    groups = prod(-(-e // t) for e, t in zip(extents, plan["wg"], strict=True))
    cores = max(1, target.threads)
    waves = ceil(groups / cores)
    wg_touched = groups * sum(m.footprint(plan["wg"]) for m in (*loops.inputs, loops.output)) * elem
    f.update(par_workgroups=_lg(groups), par_per_core=_lg(groups / cores),
             par_load_balance=groups / (waves * cores),
             par_traffic_ratio=_lg(wg_touched / max(1, static.compulsory_bytes)))

    limit = limits(target)
    stack = workgroup_stack_bytes(resolved, elem, task.stores_into_slice) if strategy else 0
    largest = _largest_vector(resolved, elem) if strategy else 0
    f.update(alloc_stack_bytes=_lg(stack), alloc_stack_share=stack / limit.stack_bytes,
             alloc_stack_over=float(stack > limit.stack_bytes), alloc_vector_max_bytes=_lg(largest),
             alloc_vector_share=largest / limit.vector_bytes, alloc_vector_over=float(largest > limit.vector_bytes),
             alloc_packed_bytes=_lg(resolved.packed_panel_bytes) if strategy and _packs(sketch) else 0.0,
             alloc_padded_bytes=_lg(resolved.padded_panel_bytes) if strategy and _pads(sketch) else 0.0,
             alloc_im2col_bytes=_lg(resolved.im2col_panel_bytes * resolved.im2col_buffers)
             if strategy and _im2col(sketch) else 0.0,
             alloc_padded_input_bytes=_lg(resolved.padded_input_bytes) if strategy else 0.0)
    # Register-tile instances (each runs its reduction steps), cache and workgroup tile instances (each refills
    # its tile's bytes into the level below).
    instances = {lv: prod(ceil(e / t) for e, t in zip(extents, plan[lv], strict=True)) for lv in LEVELS}
    red_steps = prod(reg[d] for d in red_dims)
    flops = max(1.0, float(task.flops))
    ideal_ops = max(1.0, flops / 2 / lanes)
    tile_bytes = {lv: sum(m.footprint(plan[lv]) for m in (*loops.inputs, loops.output)) * elem for lv in LEVELS}
    f.update(est_vector_op_ratio=_lg(instances["reg"] * red_steps * vector_fmas / ideal_ops),
             est_loads_per_flop=_lg(1e3 * instances["reg"] * red_steps * loads / flops),
             est_l1_fill_per_flop=_lg(1e3 * instances["cache"] * tile_bytes["cache"] / flops),
             est_l2_fill_per_flop=_lg(1e3 * instances["wg"] * tile_bytes["wg"] / flops),
             est_steps_per_flop=_lg(1e3 * instances["reg"] / flops))
    f.update(ann_consumers_inner=float(resolved.consumers_inner),
             ann_deferred_rows=float(any(resolved.deferred_row_tiles)),
             ann_loop_reordered=float(bool(resolved.loop_order)))

    values = dict(candidate.values)
    for known in KNOWN_CHOICES:
        chosen = values.get(known.name) if known in sketch.knobs else None
        f.update({f"{known.name}_{option}": float(chosen is not None and chosen[0] == i)
                  for i, option in enumerate(known.options)})
    choices = [0.0] * CHOICE_SLOTS
    for knob in sketch.knobs:
        if isinstance(knob, ChoiceKnob) and knob not in KNOWN_CHOICES and knob.name in values:
            choices[zlib.crc32(knob.name.encode()) % CHOICE_SLOTS] = (values[knob.name][0] + 1) / len(knob.options)
    f.update({f"choice_{i}": c for i, c in enumerate(choices)})
    return {name: f[name] for name in NAMES}


def _packs(sketch: Sketch) -> bool:
    return any(step.kind == "pack" for step in sketch.steps)


def _pads(sketch: Sketch) -> bool:
    return any(step.kind == "pad" for step in sketch.steps)


def _im2col(sketch: Sketch) -> bool:
    return any(step.kind == "implicit-gemm" for step in sketch.steps)


@dataclass(frozen=True)
class ProgramFeatures:
    """The resolved program's features (`program_features`), one row per candidate."""

    name: str = "program"
    version: int = VERSION

    @property
    def names(self) -> tuple[str, ...]:
        return NAMES

    def extract(self, task: Task, sketches: dict[int, Sketch], candidates: list[Candidate],
                target: Target) -> FeatureMatrix:
        statics: dict[int, _Static] = {}
        rows = []
        for c in candidates:
            sketch = sketches[c.sketch_index]
            if c.sketch_index not in statics:
                statics[c.sketch_index] = _static(task, sketch, target, resolve(sketch, c, task))
            rows.append(list(program_features(task, sketch, c, target, statics[c.sketch_index]).values()))
        return FeatureMatrix(NAMES, np.asarray(rows, dtype=np.float32).reshape(len(rows), len(NAMES)))

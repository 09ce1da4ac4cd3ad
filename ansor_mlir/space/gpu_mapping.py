"""Resolve a GPU candidate into its launch: blocks, threads, shared-memory tiles, registers, IREE configuration.

The GPU counterpart of `space.resolve`: one function turns a candidate of a
GPU sketch (`MapToGpu`, `TensorCore`, `CrossThreadReduction` traces) into a
`GpuMapping`, and the validity checks, the features, `generate-sketches`'s
mapping description and the configuration IREE receives
(`#iree_gpu.lowering_config` + `translation_info`) all read it. Limits come
from the target's `GpuSpec` (`space.limits.gpu_limits`), never constants.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from ansor_mlir.core.affine import AffineExpr
from ansor_mlir.core.schedule import (
    Candidate,
    ChoiceKnob,
    CrossThreadReduction,
    Family,
    MapToGpu,
    PromoteOperands,
    Sketch,
    TensorCore,
    tile_knobs,
)
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import GpuLaunch, IreeConfig, Task
from ansor_mlir.space.dag import task_dag, unit_register_dims
from ansor_mlir.space.limits import gpu_limits

PROMOTE = ChoiceKnob("promote_operands", ("shared", "none"))
# Tensor-core knobs: warps per block along M and N, instructions per warp along M and N, instructions per
# reduction step, software-pipelined shared-memory stages (0: IREE's default).
WARPS_M = ChoiceKnob("warps_m", ("1", "2", "4"))
WARPS_N = ChoiceKnob("warps_n", ("1", "2", "4"))
SUBGROUP_M = ChoiceKnob("subgroup_m", ("1", "2", "4"))
SUBGROUP_N = ChoiceKnob("subgroup_n", ("1", "2", "4"))
K_TILES = ChoiceKnob("k_tiles", ("1", "2", "4", "8"))
PREFETCH = ChoiceKnob("prefetch_stages", ("0", "2"))
# Cross-thread reduction knobs: rows per block, lanes' vector width and unroll.
ROWS = ChoiceKnob("rows", ("1", "2", "4"))
UNROLL = ChoiceKnob("unroll", ("1", "2", "4"))


@dataclass(frozen=True)
class GpuMapping:
    """What a GPU candidate launches: per-loop tiles of a block, a warp and a thread, the reduction step,
    blocks in the grid, threads per block, shared memory per block and accumulators per thread."""

    config: IreeConfig
    block_tile: tuple[int, ...]
    thread_tile: tuple[int, ...]
    reduction_step: tuple[int, ...]
    blocks: int
    threads: int
    shared_bytes: int
    accumulators: int

    @property
    def warps(self) -> int:
        assert self.config.gpu is not None
        return -(-self.threads // self.config.gpu.subgroup_size)


def is_gpu_sketch(sketch: Sketch) -> bool:
    return any(sketch.has(kind) for kind in (MapToGpu, TensorCore, CrossThreadReduction))


def gpu_mapping(sketch: Sketch, candidate: Candidate, task: Task) -> GpuMapping:
    """The launch a candidate of a GPU sketch stands for."""
    values = dict(candidate.values)
    extents = task.root.loop_extents

    def pick(knob: ChoiceKnob) -> int:
        return int(candidate.choice(knob) or knob.options[0])

    parallel = [it == "parallel" for it in task.root.iterator_types]
    if isinstance(core := sketch.step(TensorCore), TensorCore):
        return _tensor_core(sketch, core, candidate, task, pick)
    if isinstance(split := sketch.step(CrossThreadReduction), CrossThreadReduction):
        return _cross_thread(split, task, pick)
    step = sketch.step(MapToGpu)
    assert isinstance(step, MapToGpu)
    block = [1 if p else 0 for p in parallel]
    thread = [1 if p else 0 for p in parallel]
    reduction = [0] * len(extents)
    for knob in tile_knobs(sketch.knobs):
        chain = values[knob.name]
        if knob.levels == ("reduction",):
            reduction[knob.dim] = chain[0]
        else:
            block[knob.dim], thread[knob.dim] = chain
    threads = prod(b // t for b, t, p in zip(block, thread, parallel, strict=True) if p)
    promoted = candidate.choice(PROMOTE) != "none" if sketch.has(PromoteOperands) else False
    inputs = tuple(range(_num_inputs(task))) if promoted and any(reduction) else ()
    launch = GpuLaunch((threads, 1, 1), step.subgroup_size, promote_operands=inputs)
    levels = (("workgroup", tuple(block)), ("reduction", tuple(reduction)), ("thread", tuple(thread)))
    shared = _shared_bytes(task, block, reduction, inputs)
    return GpuMapping(IreeConfig(step.pipeline, levels, launch), tuple(block), tuple(thread), tuple(reduction),
                      _blocks(extents, block), threads, shared, prod(t for t in thread if t))


def _tensor_core(sketch: Sketch, core: TensorCore, candidate: Candidate, task: Task, pick) -> GpuMapping:
    """Block tile `warps x instructions x shape` along M and N, reduction step `k_tiles` instructions deep;
    IREE reads `subgroup` and `reduction` in instructions, `workgroup` in elements."""
    (kind_knob, *_) = core.knobs
    option = candidate.choice(kind_knob) or kind_knob.options[0]
    m, n, k = core.mnk[kind_knob.options.index(option)]
    extents = task.root.loop_extents
    block = [1 if it == "parallel" else 0 for it in task.root.iterator_types]
    subgroup = [0] * len(extents)
    reduction = [0] * len(extents)
    block[core.m] = pick(WARPS_M) * pick(SUBGROUP_M) * m
    block[core.n] = pick(WARPS_N) * pick(SUBGROUP_N) * n
    subgroup[core.m], subgroup[core.n] = pick(SUBGROUP_M), pick(SUBGROUP_N)
    reduction[core.k] = pick(K_TILES)
    step = sketch.step(MapToGpu)
    warp = step.subgroup_size if isinstance(step, MapToGpu) else 32
    threads = pick(WARPS_M) * pick(WARPS_N) * warp
    launch = GpuLaunch((threads, 1, 1), warp, option, tuple(range(_num_inputs(task))), prefetch_stages=pick(PREFETCH))
    levels = (("workgroup", tuple(block)), ("reduction", tuple(reduction)), ("subgroup", tuple(subgroup)))
    elements = [0] * len(extents)
    elements[core.k] = reduction[core.k] * k
    stages = max(1, launch.prefetch_stages)
    shared = _shared_bytes(task, block, elements, launch.promote_operands) * stages
    accumulators = pick(SUBGROUP_M) * pick(SUBGROUP_N) * m * n // warp
    thread = tuple(0 for _ in extents)
    return GpuMapping(IreeConfig("TileAndFuse", levels, launch), tuple(block), thread, tuple(elements),
                      _blocks(extents, block), threads, shared, accumulators)


def _cross_thread(split: CrossThreadReduction, task: Task, pick) -> GpuMapping:
    """Warps x lanes x vector x unroll elements of the innermost (reduction) loop per step, combined across
    lanes and warps; `rows` outputs of the innermost parallel loop per block."""
    extents = task.root.loop_extents
    loops = len(extents)
    warps, vector, unroll = pick(split.knobs[0]), pick(split.knobs[1]), pick(UNROLL)
    block = [1 if it == "parallel" else 0 for it in task.root.iterator_types]
    inner_parallel = max(d for d, it in enumerate(task.root.iterator_types) if it == "parallel")
    block[inner_parallel] = pick(ROWS)
    partial = [0] * loops
    thread = [0] * loops
    partial[-1] = warps * split.subgroup_size * vector * unroll
    thread[-1] = vector
    identity = tuple(range(loops))
    launch = GpuLaunch((warps * split.subgroup_size, 1, 1), split.subgroup_size,
                       lane_basis=((*([1] * (loops - 1)), split.subgroup_size), identity),
                       subgroup_basis=((*([1] * (loops - 1)), warps), identity))
    levels = (("workgroup", tuple(block)), ("partial_reduction", tuple(partial)), ("thread", tuple(thread)))
    # Partial results of every warp meet in shared memory: one element per warp and row.
    shared = warps * pick(ROWS) * task.root.element_bytes
    return GpuMapping(IreeConfig("VectorDistribute", levels, launch), tuple(block), tuple(thread), tuple(partial),
                      _blocks(extents, block), warps * split.subgroup_size, shared, vector * unroll * pick(ROWS))


def is_valid_gpu(sketch: Sketch, values: dict[str, tuple[int, ...]], task: Task, target: Target) -> bool:
    """Reject launches the target cannot run or IREE cannot distribute: too many or too few threads (not whole
    warps), a block tile that does not divide its loop, too much shared memory, too many accumulators."""
    mapping = gpu_mapping(sketch, Candidate(task.key, sketch.index, tuple(sorted(values.items()))), task)
    limit = gpu_limits(target)
    extents = task.root.loop_extents
    tiles = (*mapping.block_tile, *mapping.reduction_step)
    if any(t and e % t for t, e in zip(tiles, (*extents, *extents), strict=True)):
        return False
    if any(t and b and b % t for t, b in zip(mapping.thread_tile, mapping.block_tile, strict=True)):
        return False
    # Loops mapped to thread dimensions x, y, z (innermost first) stay within each dimension's limit.
    per_dim = [b // t for b, t in zip(mapping.block_tile, mapping.thread_tile, strict=True) if b and t and b > t]
    if sketch.family is Family.TRANSFORM and any(
            n > cap for n, cap in zip(reversed(per_dim), limit.max_block_dims, strict=False)):
        return False
    if sketch.family is Family.TRANSFORM and not _vectorizes(mapping, task):
        return False
    return (limit.warp_size <= mapping.threads <= limit.max_threads and mapping.threads % limit.warp_size == 0
            and mapping.shared_bytes <= limit.shared_memory_bytes
            and mapping.accumulators * max(1, task.root.element_bytes // 4) <= limit.accumulator_registers)


def _vectorizes(mapping: GpuMapping, task: Task) -> bool:
    """A strategy's per-thread tile keeps unit the loops of compound accesses (convolution windows: `kh`, `kw`
    in `oh + kh`), as the CPU strategies do, or the vectorizer fails on it (`failed to apply`, seen on 3x3
    convolutions with a 3-deep `kh` step)."""
    dag = task_dag(task)
    if dag is None:
        return False
    register = [t or r for t, r in zip(mapping.thread_tile, mapping.reduction_step, strict=True)]
    return all(register[d] <= 1 for d in unit_register_dims(dag.ops[dag.root]) if d < len(register))


def describe(sketch: Sketch, task: Task) -> dict[str, str]:
    """The mapping a GPU sketch leaves open, in words (what `generate-sketches` prints): which loops go to
    blocks and threads, what shared memory holds, what stays in registers."""
    loops = [f"d{d}" for d, it in enumerate(task.root.iterator_types) if it == "parallel"]
    reductions = [f"d{d}" for d, it in enumerate(task.root.iterator_types) if it == "reduction"]
    operands = ", ".join(str(i) for i in range(_num_inputs(task)))
    if isinstance(core := sketch.step(TensorCore), TensorCore):
        return {"blocks": f"d{core.m}, d{core.n} by warps_m x subgroup_m x M, warps_n x subgroup_n x N of mma_kind",
                "threads": "warps_m x warps_n warps, each subgroup_m x subgroup_n tensor-core tiles",
                "shared_memory": f"operands {operands}: block tile x k_tiles x K per step, prefetch_stages deep",
                "registers": "accumulator fragments of each warp's tiles"}
    if isinstance(sketch.step(CrossThreadReduction), CrossThreadReduction):
        return {"blocks": f"{loops[-1]} by rows, other parallel loops by 1",
                "threads": f"{reductions[-1]} across warps x lanes, vector elements per lane, unroll steps",
                "shared_memory": "one partial result per warp and row, combined after the lanes' shuffle",
                "registers": "vector x unroll x rows partial sums per lane"}
    promoted = f"operands {operands}: block tile x reduction step (promote_operands)" if reductions else "none"
    return {"blocks": ", ".join(f"{d} by its workgroup tile" for d in loops),
            "threads": ", ".join(f"{d} by workgroup/thread" for d in loops),
            "shared_memory": promoted,
            "registers": "the thread tile's accumulators across " + (", ".join(reductions) or "no reduction")}


def _num_inputs(task: Task) -> int:
    return len(task.root.indexing_maps) - 1


def _blocks(extents: tuple[int, ...], block: list[int]) -> int:
    return prod(-(-e // b) for e, b in zip(extents, block, strict=True) if b)


def _span(expr: AffineExpr, tiles: list[int], extents: tuple[int, ...]) -> int:
    """Elements an access spans over a tile: a window `d0 + d3` spans `t0 + t3 - 1`."""
    sizes = [(tiles[d] or extents[d]) for d in expr.dims()]
    if not sizes:
        return 1
    return sum(abs(c) * (s - 1) for (_, c), s in zip(expr.terms, sizes, strict=True)) + 1 if expr.linear \
        else prod(sizes)


def _shared_bytes(task: Task, block: list[int], step: list[int], operands: tuple[int, ...]) -> int:
    """Shared memory of the promoted operands' tiles: each input's span over the block tile (parallel loops)
    and one reduction step (reduction loops)."""
    tiles = [b or s for b, s in zip(block, step, strict=True)]
    extents = task.root.loop_extents
    total = 0
    for i in operands:
        amap = task.root.indexing_maps[i]
        total += prod(_span(expr, tiles, extents) for expr in amap.results)
    return total * task.root.element_bytes

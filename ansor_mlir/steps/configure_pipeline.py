"""`ConfigurePipeline`: an IREE CPU pipeline (`DoubleTilingExpert`) whose tile sizes per level are the decisions.

Nothing is emitted but the configuration (`space.resolve.render_config`,
the tiles per level); the checks are what IREE's pipeline makes of those
tiles: the innermost tiles are the register tile, and IREE vectorizes a fused
consumer, and the fill and epilogue around a cache-level reduction loop, at
the cache tile.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from ansor_mlir.core.schedule import REDUCTION, Candidate, ConfigurePipeline, Sketch, tile_knobs
from ansor_mlir.core.task import IreeConfig, Task
from ansor_mlir.space import dag as dags
from ansor_mlir.steps.checks import CheckContext
from ansor_mlir.steps.step_kind import StepKind


def vector_tiles(sketch: Sketch, values: dict[str, tuple[int, ...]]) -> dict[int, int]:
    """Innermost (register-level) tile per loop."""
    return {knob.dim: values[knob.name][-1] for knob in tile_knobs(sketch.knobs)}


def _first_cache_tiles(sketch: Sketch, values: dict[str, tuple[int, ...]]) -> dict[int, int]:
    """Per loop, its tile at the first level below distribution (its extent when no such level tiles it)."""
    first: dict[int, int] = {}
    for knob in tile_knobs(sketch.knobs):
        inner = [i for i, lv in enumerate(knob.levels) if lv != "distribution"]
        first[knob.dim] = values[knob.name][inner[0]] if inner else knob.extent
    return first


def pipeline_consumer_vector_elements(sketch: Sketch, values: dict[str, tuple[int, ...]], task: Task) -> int:
    """The largest vector an IREE pipeline gives a fused consumer with loops of its own.

    IREE vectorizes such a consumer at the first tiling level below
    distribution (the cache tile when there is one), and a consumer loop the
    root does not have (softmax's normalisation over the root's reduction loop) is never
    tiled: a 256-row cache tile of a 1536x128 softmax becomes a 256x128
    vector, which IREE rejects (128 KiB, over its limit on any x86 CPU). 41 of 64 random softmax
    configurations failed this way before the check.
    """
    dag = dags.task_dag(task)
    if dag is None:
        return 0
    first_level = _first_cache_tiles(sketch, values)
    largest = 0
    for c in dag.consumers:
        mapped = dags.dim_map(dag.ops, dag.root, c)
        op = dag.ops[c]
        if all(d in mapped or extent == 1 for d, extent in enumerate(op.extents)):
            continue  # walks the root's loops only: fused at the register level (GMM's bias + relu)
        size = prod(first_level.get(mapped[d], 1) if d in mapped else extent for d, extent in enumerate(op.extents))
        largest = max(largest, size)
    return largest


def pipeline_cache_tile_vector_elements(sketch: Sketch, values: dict[str, tuple[int, ...]]) -> int:
    """The vector an IREE pipeline gives the accumulator's fill and the fused consumers when the cache level
    loops over the reduction: they run outside that loop, on the whole cache tile (0 when it does not loop).

    The README's 512^3 matmul + bias + relu with a 128x32 cache tile and K tiles of 64: a `vector<128x32xf32>`
    zero fill, bias add and relu, 16 KiB, which IREE rejects on AVX2 (its limit is 512 native vectors).
    """
    knobs = tile_knobs(sketch.knobs)
    loops = any(knob.kind == REDUCTION and "cache_reduction" in knob.levels
                and values[knob.name][knob.levels.index("cache_reduction")] < knob.extent for knob in knobs)
    if not loops:
        return 0
    first = _first_cache_tiles(sketch, values)
    return prod(first[knob.dim] for knob in knobs if knob.kind != REDUCTION)


def pipeline_cache_level_vector_elements(sketch: Sketch, values: dict[str, tuple[int, ...]], task: Task) -> int:
    """The largest vector an IREE pipeline makes above the register tile: a consumer's or the cache tile's."""
    return max(pipeline_consumer_vector_elements(sketch, values, task),
               pipeline_cache_tile_vector_elements(sketch, values))


@dataclass(frozen=True)
class PipelineKnobTiles:
    """The knobs' innermost tiles as IREE's pipeline makes its register tile: accumulators within the register
    budget, the register tile within the largest vector, the innermost parallel loop in whole vectors."""

    def __call__(self, ctx: CheckContext) -> bool:
        inner = vector_tiles(ctx.sketch, ctx.values)
        tiles = tile_knobs(ctx.sketch.knobs)
        parallel = prod(inner[k.dim] for k in tiles if k.kind != REDUCTION)
        reduction = prod(inner[k.dim] for k in tiles if k.kind == REDUCTION)
        if parallel * ctx.element_bytes > ctx.limits.accumulator_bytes:
            return False
        if parallel * reduction * ctx.element_bytes > ctx.limits.vector_bytes:
            return False
        innermost = max((k for k in tiles if k.kind != REDUCTION), key=lambda k: k.dim, default=None)
        if innermost is None:
            return True
        tile = inner[innermost.dim]
        return tile % ctx.lanes == 0 or tile == innermost.extent


@dataclass(frozen=True)
class PipelineCacheVectors:
    """The vectors IREE's pipeline makes at the cache tile stay within the largest vector."""

    def __call__(self, ctx: CheckContext) -> bool:
        elements = pipeline_cache_level_vector_elements(ctx.sketch, ctx.values, ctx.task)
        return elements * ctx.element_bytes <= ctx.limits.vector_bytes


def pipeline_pad_elements(sketch: Sketch, values: dict[str, tuple[int, ...]], task: Task) -> int:
    """Elements of the vector an IREE pipeline makes of a pad its dispatch holds: the windowed input over the
    workgroup's parallel tiles and the innermost tiles of the reduction loops (0: the dispatch pads nothing).

    A depthwise 1-D convolution's 50-step, 256-channel workgroup tile with its 3 taps at dilation 4 became a
    `vector<256x58xf32>`; a 1-D convolution reducing over its input channels pads a channel tile at a time."""
    dag = dags.task_dag(task)
    if not task.pads_input or dag is None:
        return 0
    root = dag.ops[dag.root]
    sizes = list(root.extents)
    for knob in tile_knobs(sketch.knobs):
        if not knob.of_root or knob.dim >= len(sizes):
            continue
        chain = values[knob.name]
        if root.iterator_types[knob.dim] != "parallel":
            sizes[knob.dim] = chain[-1] or sizes[knob.dim]
        elif "distribution" in knob.levels:
            sizes[knob.dim] = chain[knob.levels.index("distribution")] or sizes[knob.dim]
    return sum(amap.footprint(sizes) for amap in dags.window_maps(root))


@dataclass(frozen=True)
class PipelinePadVector:
    """A dispatch that pads its own input: IREE's pipeline vectorizes the pad as one vector
    (`pipeline_pad_elements`), which stays within the largest vector."""

    def __call__(self, ctx: CheckContext) -> bool:
        return pipeline_pad_elements(ctx.sketch, ctx.values, ctx.task) * ctx.element_bytes <= ctx.limits.vector_bytes


def level_config(sketch: Sketch, candidate: Candidate, loops: int, fixed: dict[str, dict[int, int]]) -> IreeConfig:
    """The tile sizes per level the knobs choose over `loops` loops, with the tiles the trace fixes (`fixed`,
    per level)."""
    if not sketch.knobs:
        return IreeConfig(pipeline=sketch.pipeline, levels=())
    values = dict(candidate.values)
    levels = []
    for level in sketch.levels:
        sizes = [0] * loops
        for knob in tile_knobs(sketch.knobs):
            if level in knob.levels and knob.of_root and knob.dim < loops:
                sizes[knob.dim] = values[knob.name][knob.levels.index(level)]
        for d, size in fixed.get(level, {}).items():
            sizes[d] = size
        levels.append((level, tuple(sizes)))
    return IreeConfig(pipeline=sketch.pipeline, levels=tuple(levels))


class ConfigurePipelineKind(StepKind[ConfigurePipeline]):
    step = ConfigurePipeline
    checks = (PipelineKnobTiles(), PipelineCacheVectors(), PipelinePadVector())

    def config(self, step: ConfigurePipeline, sketch: Sketch, candidate: Candidate, task: Task,
               fixed: dict[str, dict[int, int]]) -> IreeConfig | None:
        return level_config(sketch, candidate, len(task.root.loop_extents), fixed)

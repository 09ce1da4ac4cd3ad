"""Sketch derivation rules: small objects that turn a task into program structures.

Like Ansor's derivation rules, each rule looks at the task (and the target)
and, when it applies, contributes sketches; a refining rule (`refine`)
instead derives sketches from those the rules before it made, as Ansor's
rules apply to the states earlier rules produced. Rules are listed per
target; users add their own by passing a different list to
`generate_sketches`. No rule names an operator: they read loop structure only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

from ansor_mlir.core.schedule import (
    LEVEL_KIND,
    LEVEL_ORDER,
    PIPELINE,
    REDUCTION,
    SPATIAL,
    ChoiceKnob,
    ConfigurePipeline,
    Family,
    ImplicitGemm,
    MicroKernel,
    PadRows,
    Sketch,
    TileKnob,
    UseIreeDefault,
)
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.errors import AnsorError
from ansor_mlir.space import dag as dags
from ansor_mlir.space import decisions, gpu_sketch_rules, implicit_gemm, micro_kernel
from ansor_mlir.steps.interchange import InterchangeRule


class SketchRule(Protocol):
    """Contributes sketches of a task (`index`: the first one's)."""

    name: str

    def applies(self, task: Task, target: Target) -> bool: ...

    def apply(self, task: Task, target: Target, index: int) -> list[Sketch]: ...


@runtime_checkable
class RefiningRule(Protocol):
    """Derives the task's sketches from those the rules before it made: it may change them (keeping their
    indices) and append sketches after them."""

    name: str

    def applies(self, task: Task, target: Target) -> bool: ...

    def refine(self, task: Task, target: Target, sketches: list[Sketch]) -> list[Sketch]: ...


@dataclass(frozen=True)
class IreeDefaultRule:
    """Sketch zero: IREE's own configuration, so tuning can never lose to it."""

    name: str = "iree-default"

    def applies(self, task: Task, target: Target) -> bool:
        return True

    def apply(self, task: Task, target: Target, index: int) -> list[Sketch]:
        """IREE's configuration, or (when IREE's own cannot be set) IREE with no configuration."""
        config = task.default_config
        return [
            Sketch(
                task_key=task.key,
                index=index,
                family=Family.PIPELINE,
                pipeline=config.pipeline if config else "none",
                levels=tuple(name for name, _ in config.levels) if config else (),
                steps=(UseIreeDefault(config=config),),
                rules=(self.name,),
            )
        ]


@dataclass(frozen=True)
class MultiLevelTilingRule:
    """Ansor's multi-level tiling mapped onto IREE's CPU tiling levels.

    `with_cache=True` gives the full `SSRSRS` structure (workgroup, cache,
    register levels); `False` drops the cache level (`SRS`), which is what
    IREE's default uses and is cheaper for small problems.
    """

    with_cache: bool
    pipeline: str = "DoubleTilingExpert"

    @property
    def name(self) -> str:
        return "multi-level-tiling" + ("-cached" if self.with_cache else "")

    def applies(self, task: Task, target: Target) -> bool:
        config = task.default_config
        if config is None or config.pipeline not in ("DoubleTilingExpert", "Default"):
            return False
        return not self.with_cache or bool(task.root.reduction_dims)

    def levels(self) -> tuple[str, ...]:
        wanted = {"distribution", "vector_common_parallel", "vector_reduction"}
        if self.with_cache:
            wanted |= {"cache_parallel", "cache_reduction"}
        return tuple(level for level in LEVEL_ORDER if level in wanted)

    def apply(self, task: Task, target: Target, index: int) -> list[Sketch]:
        levels = self.levels()
        spatial = tuple(lv for lv in levels if LEVEL_KIND[lv] == SPATIAL)
        reduction = tuple(lv for lv in levels if LEVEL_KIND[lv] == REDUCTION)
        knobs = []
        for dim, (extent, iterator) in enumerate(
            zip(task.root.loop_extents, task.root.iterator_types, strict=True)
        ):
            dim_levels = reduction if iterator == "reduction" else spatial
            knobs.append(TileKnob(name=f"d{dim}", dim=dim, extent=extent, levels=dim_levels))
        return [
            Sketch(
                task_key=task.key,
                index=index,
                family=Family.PIPELINE,
                pipeline=self.pipeline,
                levels=levels,
                steps=(ConfigurePipeline(tuple(knobs), self.pipeline),),
                rules=(self.name,),
            )
        ]


@dataclass(frozen=True)
class TransformTilingRule:
    """The transform family: a full codegen strategy with Ansor's multi-level tiling.

    `with_cache=True` adds the cache levels (`SSRSRS`); consumers are fused at
    a chosen level, fills always into the root's tiles.
    """

    with_cache: bool

    @property
    def name(self) -> str:
        return "td-multi-level-tiling" + ("-cached" if self.with_cache else "")

    def applies(self, task: Task, target: Target) -> bool:
        dag = dags.task_dag(task)
        if dag is None:
            return False
        return not self.with_cache or bool(dag.ops[dag.root].reduction_dims)

    def levels(self) -> tuple[str, ...]:
        wanted = {"distribution", "vector_common_parallel", "vector_reduction", "vector_inner_parallel"}
        if self.with_cache:
            wanted |= {"cache_parallel", "cache_reduction"}
        return tuple(level for level in LEVEL_ORDER if level in wanted)

    def apply(self, task: Task, target: Target, index: int) -> list[Sketch]:
        dag = dags.task_dag(task)
        assert dag is not None
        levels = self.levels()
        return [Sketch(task.key, index, Family.TRANSFORM, PIPELINE, levels, decisions.transform_steps(dag, levels),
                       (self.name,))]


def register_level_sketch(task: Task, index: int, rule: str, **structure: bool) -> Sketch:
    """A transform sketch tiled at the workgroup and register levels (no cache level), with the structural
    primitives `structure` asks for (`rfactor`, `padded`, `decomposed`)."""
    dag = dags.task_dag(task)
    assert dag is not None
    levels = ("distribution", "vector_common_parallel", "vector_reduction", "vector_inner_parallel")
    return Sketch(task.key, index, Family.TRANSFORM, PIPELINE, levels,
                  decisions.transform_steps(dag, levels, **structure), ("td-multi-level-tiling", rule))


@dataclass(frozen=True)
class TransformRfactorRule:
    """Reduction factorization: partial sums in a vector across the reduction loop.

    Applies when the innermost loop of the root is a long reduction (rows of
    softmax, norms, small outputs), where tiling only the spatial loops leaves
    nothing to vectorize.
    """

    name: str = "rfactor"

    def applies(self, task: Task, target: Target) -> bool:
        dag = dags.task_dag(task)
        return dag is not None and dag.rfactor_pays(target.vector_lanes(task.root.element_bytes))

    def apply(self, task: Task, target: Target, index: int) -> list[Sketch]:
        return [register_level_sketch(task, index, self.name, rfactor=True)]


@dataclass(frozen=True)
class TransformPaddingRule:
    """Padded register tiles: whole-vector tiles over loops they do not divide.

    Applies when a register-tiled loop of the root has only poor divisors (an
    output row of 109, channels that are not whole vectors). The sketch is the
    multi-level tiling one with `padded` tile knobs: partial register tiles
    are padded to full static tiles (`transform.structured.pad`) and the pads
    vectorized into out-of-bounds (masked) reads and writes.
    """

    name: str = "padding"

    def applies(self, task: Task, target: Target) -> bool:
        dag = dags.task_dag(task)
        return dag is not None and dag.pad_pays(target.vector_lanes(task.root.element_bytes))

    def apply(self, task: Task, target: Target, index: int) -> list[Sketch]:
        return [register_level_sketch(task, index, self.name, padded=True)]


@dataclass(frozen=True)
class TransformPackingRule:
    """Packed layout: a contraction's operands re-laid out with the vector loop innermost.

    Applies when the output's vector loop reads an input across its rows
    (`A @ B^T`: linear layers, attention scores). The sketch is the cached
    multi-level tiling one (`SSRSRS`); above the register levels the root is
    packed by its register vector tile (`[j/nr, k, nr]` panels of `B`, as
    GotoBLAS and mmt4d do), so every register step reads whole vectors.
    """

    name: str = "packing"

    def applies(self, task: Task, target: Target) -> bool:
        dag = dags.task_dag(task)
        return dag is not None and bool(dag.packed_operands())

    def apply(self, task: Task, target: Target, index: int) -> list[Sketch]:
        dag = dags.task_dag(task)
        assert dag is not None
        levels = TransformTilingRule(with_cache=True).levels()
        steps = decisions.transform_steps(dag, levels, packed=True,
                                         pack_block=target.transpose_block(task.root.element_bytes))
        return [Sketch(task.key, index, Family.TRANSFORM, PIPELINE, levels, steps,
                       ("td-multi-level-tiling-cached", self.name))]


@dataclass(frozen=True)
class TransformDecomposeRule:
    """Convolution decomposition: register tiles of several output pixels over strided windows.

    Applies to 2-D convolutions (NHWC x HWCF or depthwise NHWC x HWC, any
    stride or dilation). The other sketches keep every window loop unit at
    the register level (a strided window `2 * ow + kw` is no projected
    permutation), so a register tile holds one output pixel. Here only `oh`
    and `kh` are unit: the tile is specialized to the named convolution and
    decomposed into a 1-D one, which the vectorizer lowers with strided reads
    over `ow` and the `kw` taps unrolled (IREE's `ConvTileAndDecomposeExpert`
    does the same).
    """

    name: str = "decompose"

    def applies(self, task: Task, target: Target) -> bool:
        dag = dags.task_dag(task)
        return dag is not None and dags.decomposable_rows(dag.ops[dag.root]) is not None

    def apply(self, task: Task, target: Target, index: int) -> list[Sketch]:
        return [register_level_sketch(task, index, self.name, decomposed=True)]


def micro_kernel_shapes(
    task: Task, target: Target, peel: bool = False, whole_k: bool = False, window_rows: bool = False,
    packed: bool = False,
) -> tuple[micro_kernel.MicroKernelLoops | None, tuple[str, ...]]:
    """The root's outer-product loops (with `window_rows`, rows a window loop; with `packed`, inputs read across
    the vector loop allowed) and the `MRxNR` register tiles the target fits, or `(None, ())`; with `peel` also the
    largest that leaves a partial row tile, with `whole_k` none that a short reduction loop unrolled whole would
    spill (`micro_kernel.register_shapes`)."""
    dag = dags.task_dag(task)
    loops = micro_kernel.micro_kernel_loops(dag, packed, window_rows) if dag is not None else None
    if loops is None:
        return None, ()
    root = dag.ops[dag.root]
    k_unroll = micro_kernel.whole_k_unroll(dag) if whole_k else 1
    return loops, micro_kernel.register_shapes(root.extents[loops.rows], root.extents[loops.cols], target,
                                               task.root.element_bytes, peel, k_unroll, loops.unrolled)


@dataclass(frozen=True)
class MicroKernelPipelineRule:
    """Register-blocked micro-kernels in IREE's `DoubleTilingExpert`: its register tile one of the `MRxNR` shapes
    of `TransformMicroKernelRule`, its workgroup tiles and reduction unroll the knobs.

    Applies where IREE's pipeline configures the root and the root's loops are
    the ones its codegen tiles (no re-inserted batch loop). No cache level:
    with one, IREE vectorizes the fill and the epilogue at the cache tile
    (a 64x128 tile of the example's bias + relu is a 32 KiB vector, over
    IREE's limit), the cache blocking is the transform sketch's.
    """

    name: str = "micro-kernel"
    pipeline: str = "DoubleTilingExpert"

    def applies(self, task: Task, target: Target) -> bool:
        config, dag = task.default_config, dags.task_dag(task)
        if config is None or config.pipeline not in ("DoubleTilingExpert", "Default") or dag is None:
            return False
        same_loops = dag.ops[dag.root].extents == task.root.loop_extents
        return same_loops and bool(micro_kernel_shapes(task, target)[1])

    def apply(self, task: Task, target: Target, index: int) -> list[Sketch]:
        loops, shapes = micro_kernel_shapes(task, target)
        assert loops is not None
        levels = MultiLevelTilingRule(with_cache=False).levels()
        knobs = []
        for dim, (extent, iterator) in enumerate(zip(task.root.loop_extents, task.root.iterator_types, strict=True)):
            if extent > 1 and (iterator == "parallel" or dim == loops.k):
                level = "distribution" if iterator == "parallel" else "vector_reduction"
                knobs.append(TileKnob(f"d{dim}", dim, extent, (level,)))
        steps = (ConfigurePipeline(tuple(knobs), self.pipeline),
                 MicroKernel((ChoiceKnob("micro_kernel", shapes),), loops.rows, loops.cols))
        return [Sketch(task.key, index, Family.PIPELINE, self.pipeline, levels, steps,
                       ("multi-level-tiling", self.name))]


@dataclass(frozen=True)
class TransformMicroKernelRule:
    """Register-blocked micro-kernels, as BLAS libraries build them: an `mr x nr` outer-product register tile.

    Applies to a contraction that has a loop reusing the `B` vectors
    (`micro_kernel.micro_kernel_loops`). The register tile is one of the
    `MRxNR` shapes that fill the target's vector register file without
    spilling (`register_shapes`: 8x32 with AVX-512's 32 zmm, 4x16 with AVX2's
    16 ymm), the reduction loop innermost with the accumulators held in
    registers across it, modestly unrolled; the cache blocking (`mc`, `nc`,
    `kc`: the cache level of `SSRSRS`) and the workgroup tiles are the knobs.
    Inputs the vector loop reads across (`B` of `A @ B^T`: linear layers,
    attention scores) are packed into `[k, nr]` panels first, each `[kc, nc]`
    cache block once for all the row tiles of its workgroup, as GotoBLAS
    packs `B`.
    """

    name: str = "micro-kernel"

    def applies(self, task: Task, target: Target) -> bool:
        return bool(self._shapes(task, target)[1])

    @staticmethod
    def _packed(task: Task) -> bool:
        """The vector loop reads an input across (packing needed), and that input is a plain one."""
        dag = dags.task_dag(task)
        return dag is not None and bool(dag.packed_operands())

    def _shapes(self, task: Task, target: Target) -> tuple[micro_kernel.MicroKernelLoops | None, tuple[str, ...]]:
        return micro_kernel_shapes(task, target, peel=True, whole_k=True, packed=self._packed(task))

    def apply(self, task: Task, target: Target, index: int) -> list[Sketch]:
        loops, shapes = self._shapes(task, target)
        dag = dags.task_dag(task)
        assert dag is not None and loops is not None
        levels = TransformTilingRule(with_cache=True).levels()
        packed = self._packed(task)
        steps = decisions.micro_kernel_steps(dag, levels, loops.rows, loops.cols, shapes, packed=packed,
                                             pack_block=target.transpose_block(task.root.element_bytes))
        packing = ("packing",) if packed else ()
        return [Sketch(task.key, index, Family.TRANSFORM, PIPELINE, levels, steps,
                       ("td-multi-level-tiling-cached", *packing, self.name))]


@dataclass(frozen=True)
class TransformWindowMicroKernelRule:
    """Direct-convolution micro-kernels: `mr` output pixels x `nr` output channels held in registers across the
    window and channel loops, where the pixels are read through strided or dilated windows (`2 * ow + kw`).

    No vector spans such pixels, so the other sketches keep them unit at the
    register level: a tile of one pixel and `nr` channels does `nr / lanes`
    FMAs per filter row it loads. Here the `mr` rows are unrolled (each reads
    its input scalar as a broadcast and reuses the filter vectors), as
    oneDNN's direct convolutions do; the shapes are the target's `MRxNR`
    tiles (and the largest with a register to spare, its last partial row
    tile peeled: DIL's 109 pixels a row are prime), the cache blocking and
    workgroups the knobs. Applies where the root has no micro-kernel over
    ordinary rows (`micro_kernel_loops`).
    """

    name: str = "window-micro-kernel"

    def applies(self, task: Task, target: Target) -> bool:
        return self._shapes(task, target)[1] != ()

    def _shapes(self, task: Task, target: Target) -> tuple[micro_kernel.MicroKernelLoops | None, tuple[str, ...]]:
        if micro_kernel_shapes(task, target)[0] is not None:
            return None, ()
        return micro_kernel_shapes(task, target, peel=True, whole_k=True, window_rows=True)

    def apply(self, task: Task, target: Target, index: int) -> list[Sketch]:
        loops, shapes = self._shapes(task, target)
        dag = dags.task_dag(task)
        assert dag is not None and loops is not None
        levels = TransformTilingRule(with_cache=True).levels()
        steps = decisions.micro_kernel_steps(dag, levels, loops.rows, loops.cols, shapes, unrolled=loops.unrolled)
        return [Sketch(task.key, index, Family.TRANSFORM, PIPELINE, levels, steps,
                       ("td-multi-level-tiling-cached", self.name))]


@dataclass(frozen=True)
class TransformImplicitGemmRule:
    """Implicit GEMM: a convolution that fits a GEMM's register tiles poorly, rewritten into im2col + contraction
    before it is tiled (`ImplicitGemm`, `space.implicit_gemm`).

    Applies to convolutions (read from loop structure) that no micro-kernel
    tiles as they are: strided or dilated windows (no register tile of
    several output pixels), grouped filters read across the output channels.
    The rewritten root is a contraction over `K = kh * kw * c`: it gets the
    micro-kernel sketch (`mr` output pixels x `nr` output channels), its filter
    packed into `[K, nr]` panels per cache tile where it is read across the
    output channels (a grouped filter `[g, f, kh, kw, c]`), else cached
    multi-level tiling. The im2col panel is gathered per cache
    tile and reused by its register tiles. Not where a tap's input channels
    fill less than half a vector and the direct convolution's micro-kernel
    applies (`TransformWindowMicroKernelRule`): the panel is then gathered
    element by element (first-layer convolutions over 3 channels on Zen 3:
    C2D's best of 10 trials 14 ms against the window micro-kernel's 2.5 ms,
    C3D's of 6 1.46 s against 0.18 s).
    """

    name: str = "implicit-gemm"

    def applies(self, task: Task, target: Target) -> bool:
        dag = dags.task_dag(task)
        if dag is None or micro_kernel.micro_kernel_loops(dag) is not None:
            return False
        gemm = implicit_gemm.implicit_gemm_dag(dag)
        if gemm is None or (task.pads_input and (gemm.packed_operands()
                                                 or implicit_gemm.channels_first(dag.ops[dag.root]))):
            # A packed panel, or a channels-first one, of a dispatch that pads its own input: IREE 3.13 crashes
            # building it (a speech CNN's NCW 1-D convolutions after conv1d-pad-fusion).
            return False
        scalar_gather = implicit_gemm.channel_run(dag.ops[dag.root]) < target.vector_lanes(task.root.element_bytes) // 2
        return not (scalar_gather and TransformWindowMicroKernelRule().applies(task, target))

    def apply(self, task: Task, target: Target, index: int) -> list[Sketch]:
        dag = dags.task_dag(task)
        assert dag is not None
        gemm = implicit_gemm.implicit_gemm_dag(dag)
        assert gemm is not None
        levels = TransformTilingRule(with_cache=True).levels()
        packed = bool(gemm.packed_operands())
        loops = micro_kernel.micro_kernel_loops(gemm, packed=packed)
        root = gemm.ops[gemm.root]
        shapes = micro_kernel.register_shapes(root.extents[loops.rows], root.extents[loops.cols], target,
                                              task.root.element_bytes) if loops else ()
        packing = ("packing",) if packed else ()
        block = target.transpose_block(task.root.element_bytes)
        if loops and shapes:
            steps = decisions.micro_kernel_steps(gemm, levels, loops.rows, loops.cols, shapes, packed=packed,
                                                 pack_block=block)
            rules: tuple[str, ...] = ("td-multi-level-tiling-cached", self.name, *packing, "micro-kernel")
        else:
            steps = decisions.transform_steps(gemm, levels, packed=packed, pack_block=block)
            rules = ("td-multi-level-tiling-cached", self.name, *packing)
        channels = implicit_gemm.channel_run(dag.ops[dag.root])
        if channels >= target.vector_lanes(task.root.element_bytes) // 2:
            # Only K tiles within one tap's channels gather their im2col panel with vector loads.
            steps = implicit_gemm.align_k_tiles(steps, len(root.extents) - 1, channels)
        return [Sketch(task.key, index, Family.TRANSFORM, PIPELINE, levels, (ImplicitGemm(), *steps), rules)]


@dataclass(frozen=True)
class PadRowsRule:
    """A CPU transform sketch of a task that pads its own input, with the rows its pad is copied in (`PadRows`):
    whatever rule derived it, the strategy copies that pad into each workgroup's tile."""

    name: str = "pad-rows"

    def applies(self, task: Task, target: Target) -> bool:
        return task.pads_input and target.gpu is None

    def refine(self, task: Task, target: Target, sketches: list[Sketch]) -> list[Sketch]:
        rows = PadRows(elements=target.pad_row_elements(task.root.element_bytes))
        return [replace(s, steps=(*s.steps, rows)) if s.family is Family.TRANSFORM else s for s in sketches]


def cpu_rules() -> list[SketchRule | RefiningRule]:
    """The default rule list for `llvm-cpu` targets: both families."""
    return [
        IreeDefaultRule(),
        MultiLevelTilingRule(with_cache=False),
        MultiLevelTilingRule(with_cache=True),
        TransformTilingRule(with_cache=False),
        TransformTilingRule(with_cache=True),
        TransformRfactorRule(),
        TransformPaddingRule(),
        TransformPackingRule(),
        TransformDecomposeRule(),
        TransformMicroKernelRule(),
        TransformWindowMicroKernelRule(),
        MicroKernelPipelineRule(),
        TransformImplicitGemmRule(),
        InterchangeRule(),
        PadRowsRule(),
    ]


def cuda_rules() -> list[SketchRule | RefiningRule]:
    """The default rule list for CUDA targets: IREE's default, then the GPU rules (`space.gpu_sketch_rules`)."""
    return [IreeDefaultRule(), *gpu_sketch_rules.gpu_rules()]


# The rule list of each backend: a new target adds an entry (and its rules), not branches in the search.
RULES_BY_BACKEND: dict[str, Callable[[], list[SketchRule | RefiningRule]]] = {"llvm-cpu": cpu_rules,
                                                                              "cuda": cuda_rules}


def rules_for(target: Target) -> list[SketchRule | RefiningRule]:
    factory = RULES_BY_BACKEND.get(target.backend)
    if factory is None:
        raise AnsorError(f"no sketch rules for target backend '{target.backend}': "
                         f"known backends are {', '.join(sorted(RULES_BY_BACKEND))}")
    return factory()


def generate_sketches(task: Task, target: Target, rules: list[SketchRule | RefiningRule] | None = None
                      ) -> list[Sketch]:
    """All sketches of a task, sketch zero (IREE's default) first: the target's rules, or the `rules` given, in
    order."""
    sketches: list[Sketch] = []
    for rule in rules if rules is not None else rules_for(target):
        if not rule.applies(task, target):
            continue
        if isinstance(rule, RefiningRule):
            sketches = rule.refine(task, target, sketches)
        else:
            sketches.extend(rule.apply(task, target, len(sketches)))
    return sketches

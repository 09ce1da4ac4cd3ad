"""What one kind of schedule step does: the hooks a step kind implements, and the emission state they share.

A trace (`Sketch.steps`) is replayed by walking its steps, as MetaSchedule's
`Trace::ApplyToSchedule` has each instruction's kind apply itself. A kind is
one `StepKind` subclass in its own `steps` module, registered in
`steps.registry`; it overrides only the hooks its step takes part in:

- resolve (`space.resolve`): rewrite the DAG the sketch tiles, keep loops unit
  at the register level, fix register tiles, add what the step means to the
  loop structure (`refine`), the stack buffers it allocates, the IREE
  configuration it stands for;
- sampling (`space.annotation`): loops drawn in whole vectors, a knob drawn
  first that bounds the others;
- checks: named validity checks (`steps.checks`), and the ones the step makes
  unnecessary (`waives`);
- emission (`codegen.transform_strategy`): the strategy is built in phases
  (`PHASES`, in order), each phase walking the steps in trace order and calling
  the kind's hook of that name; steps that only choose how the fixed parts of
  the strategy run (vector lowering, hoisting) say so in `configure`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Generic, TypeVar

from iree.compiler import ir

from ansor_mlir.core.schedule import LEVEL_KIND, SPATIAL, Candidate, ChoiceKnob, Sketch, Step
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import IreeConfig, LinalgOpInfo, Task
from ansor_mlir.space.dag import Dag
from ansor_mlir.space.gpu_mapping import GpuMapping
from ansor_mlir.space.resolved import Resolved
from ansor_mlir.steps.checks import Check
from ansor_mlir.steps.script import Script

S = TypeVar("S", bound=Step)
# Per knob name: lanes its tiles are whole multiples of, least tile above the register levels.
Bounds = tuple[dict[str, int], dict[str, int]]
# The CPU strategy's phases on the matched ops, in emission order (`prepare` runs before they are matched):
# workgroups, the consumer chain, the root's tiles, the other ops' tiles, unrolling.
PHASES = ("distribute", "into_workgroup", "fuse_consumers", "tile_root", "after_root", "tile_others", "unroll")


@dataclass(frozen=True)
class Settings:
    """How the fixed parts of a CPU strategy run (vectorization, hoisting, bufferization, vector lowering), as the
    trace's steps configure them (`StepKind.configure`)."""

    # Unit loops folded away before vectorizing, so window tiles vectorize as contractions.
    fold_unit_dims: bool = True
    # Folded through reshapes rather than rank-reducing slices: a result written through a permuted map (an NCHW
    # copy of a channels-last result) keeps its layout only that way; through slices its vector writes land on a
    # unit dimension of the subview and are masked off.
    fold_unit_dims_via_reshapes: bool = False
    vectorize_padding: bool = False
    # Accumulators hoisted out of the reduction loops (cache write).
    hoist_accumulators: bool = True
    # Stack buffers allocated inside loops hoisted to the function's entry.
    hoist_static_alloc: bool = False
    contraction_lowering: str = "outerproduct"
    reduction_lowering: str = "innerparallel"
    # A padded input tile is copied in rows of at most this many elements (`transform_strategy.pad_row_tile`).
    pad_row_elements: int = 0


@dataclass(frozen=True)
class LevelTiling:
    """How the root is tiled at one level: tile sizes per loop (0: not tiled), and the loops' order (empty: the
    root's own)."""

    sizes: tuple[int, ...]
    interchange: tuple[int, ...] = ()


@dataclass
class Emission:
    """The state a CPU strategy's emitters share while it is built: handles to the dispatch's ops (in DAG order),
    the workgroup loop, the fused im2col, and the loop over K tiles to unroll around it."""

    script: Script
    resolved: Resolved
    module: ir.Value
    settings: Settings
    steps: tuple[tuple[StepKind, Step], ...]
    # The fill fused with the root's parallel tiles (`transform_strategy.fused_fill`), if any.
    fill: int | None
    handles: list[ir.Value] = field(default_factory=list)
    forall: ir.Value | None = None
    im2col: ir.Value | None = None
    # (loop, trips): the loop over the K tiles the im2col is gathered in, if short enough to unroll.
    k_loop: tuple[ir.Value, int] | None = None
    # The function being vectorized (phases after the loop nest replace it).
    func: ir.Value | None = None

    @property
    def dag(self) -> Dag:
        assert self.resolved.dag is not None
        return self.resolved.dag

    @property
    def root(self) -> LinalgOpInfo:
        return self.resolved.root

    @property
    def task(self) -> Task:
        return self.resolved.task

    def run(self, phase: str) -> None:
        """Every step's hook of `phase`, in trace order."""
        for kind, step in self.steps:
            getattr(kind, phase)(step, self)

    def level_tiling(self, level: str, tiling: LevelTiling) -> LevelTiling | None:
        """The root's tiling at `level` as the steps adjust it; None when a step cuts that level itself."""
        for kind, step in self.steps:
            adjusted = kind.level_tiling(step, self, level, tiling)
            if adjusted is None:
                return None
            tiling = adjusted
        return tiling

    def before_level(self, level: str) -> None:
        for kind, step in self.steps:
            kind.before_level(step, self, level)

    def after_root_tile(self, level: str, sizes: tuple[int, ...], loops: list[ir.Value]) -> None:
        for kind, step in self.steps:
            kind.after_root_tile(step, self, level, sizes, loops)

    def after_chain_tile(self, level: str, sizes: list[int], loops: list[ir.Value]) -> None:
        for kind, step in self.steps:
            kind.after_chain_tile(step, self, level, sizes, loops)

    def after_fill_tile(self, fill: int, sizes: list[int], loops: list[ir.Value]) -> None:
        for kind, step in self.steps:
            kind.after_fill_tile(step, self, fill, sizes, loops)

    def tile_root(self, level: str, tiling: LevelTiling) -> list[ir.Value]:
        """Tile the root at `level` (its fused fill carried along the parallel tiles); the loops made."""
        fused = self.fill is not None and LEVEL_KIND[level] == SPATIAL
        tile = self.script.tile_fuse if fused else self.script.tile_for
        self.handles[self.dag.root], loops = tile(self.handles[self.dag.root], tiling.sizes, tiling.interchange)
        return loops

    def fuse_im2col(self, container: ir.Value) -> ir.Value | None:
        """Fuse the im2col (where the trace gathers one) into `container`; the loop it now sits in."""
        if self.im2col is None:
            return None
        self.im2col, new = self.script.fuse_into(self.im2col, container)
        return new


@dataclass
class GpuEmission:
    """The state of a GPU strategy's emitters: the launch the candidate resolves to and handles to its ops."""

    script: Script
    mapping: GpuMapping
    dag: Dag
    module: ir.Value
    handles: list[ir.Value]
    # Loops mapped to threads (a loop with one thread per block is not).
    spread: list[int] = field(default_factory=list)


class StepKind(Generic[S]):
    """The behaviour of one step kind; every hook defaults to doing nothing."""

    step: ClassVar[type[Step]]
    # Validity checks a candidate of a sketch with this step must pass, and checks the step makes unnecessary.
    checks: ClassVar[tuple[Check, ...]] = ()
    waives: ClassVar[tuple[type, ...]] = ()
    # The accumulator's fill can still follow the root's parallel tiles (`transform.structured.fuse` takes every
    # producer it can tile: a step adding one keeps the fill apart).
    fill_fusable: ClassVar[bool] = True
    # Kinds whose emission carries this step's decisions, for a step that emits nothing itself.
    emitted_by: ClassVar[tuple[type[Step], ...]] = ()

    # ---- resolve ------------------------------------------------------------------------------------------

    def rewrite_dag(self, step: S, dag: Dag) -> Dag | None:
        """The DAG the sketch tiles once this step has rewritten it (None: it cannot)."""
        return dag

    def forced_units(self, step: S, root: LinalgOpInfo, forced: set[int]) -> set[int]:
        """The root's loops whose register tile must be 1."""
        return forced

    def fixed_tiles(self, step: S, candidate: Candidate, extents: tuple[int, ...], iterator_types: tuple[str, ...]
                    ) -> dict[str, dict[int, int]]:
        """Tiles the step sets on the root's loops, per level, whatever the tile knobs say."""
        return {}

    def refine(self, step: S, resolved: Resolved) -> Resolved:
        """The loop structure with what the step means added (its `Resolved` fields)."""
        return resolved

    def stack_bytes(self, step: S, resolved: Resolved) -> int:
        """Bytes of the stack buffers the step allocates per workgroup."""
        return 0

    def config(self, step: S, sketch: Sketch, candidate: Candidate, task: Task, fixed: dict[str, dict[int, int]]
               ) -> IreeConfig | None:
        """The IREE configuration a candidate stands for, where this step decides it (`fixed`: the register tiles
        the trace's steps fix, per level)."""
        return None

    # ---- sampling -----------------------------------------------------------------------------------------

    def vector_dims(self, step: S, root: LinalgOpInfo) -> tuple[int, ...]:
        """Root loops besides the output's vector loop whose register tiles are whole vectors."""
        return ()

    def leading_knob(self, step: S) -> ChoiceKnob | None:
        """A knob drawn before the others, whose option bounds their tiles (`bounds`)."""
        return None

    def bounds(self, step: S, sketch: Sketch, dag: Dag | None, target: Target, element_bytes: int, bounds: Bounds,
               leading: str | None) -> Bounds:
        """The lanes and least outer tiles of the knobs, as this step narrows them (`leading`: the option drawn
        for the leading knob)."""
        return bounds

    # ---- emission -----------------------------------------------------------------------------------------

    def configure(self, step: S, resolved: Resolved, settings: Settings) -> Settings:
        return settings

    def prepare(self, step: S, e: Emission) -> None:
        """Rewrite the dispatch before its ops are matched."""

    def distribute(self, step: S, e: Emission) -> None:
        """Tile to workgroups."""

    def into_workgroup(self, step: S, e: Emission) -> None:
        """Fuse ops the rewrite added into the workgroup loop."""

    def fuse_consumers(self, step: S, e: Emission) -> None:
        """Tile the consumer chain, with the root fused into it."""

    def tile_root(self, step: S, e: Emission) -> None:
        """Tile the root at its levels (calling the per-level hooks below)."""

    def level_tiling(self, step: S, e: Emission, level: str, tiling: LevelTiling) -> LevelTiling | None:
        return tiling

    def before_level(self, step: S, e: Emission, level: str) -> None:
        """Emit before the root is tiled at `level`."""

    def after_root_tile(self, step: S, e: Emission, level: str, sizes: tuple[int, ...], loops: list[ir.Value]
                        ) -> None:
        """Emit after the root is tiled at `level` into `loops`."""

    def after_chain_tile(self, step: S, e: Emission, level: str, sizes: list[int], loops: list[ir.Value]) -> None:
        """Emit after the consumer chain is tiled at `level` into `loops`, the root fused in."""

    def after_root(self, step: S, e: Emission) -> None:
        """Emit on the root's register tile."""

    def tile_others(self, step: S, e: Emission) -> None:
        """Tile (or pad) the ops other than the root."""

    def after_fill_tile(self, step: S, e: Emission, fill: int, sizes: list[int], loops: list[ir.Value]) -> None:
        """Emit after a fill of the root's output is tiled on its own into `loops`."""

    def unroll(self, step: S, e: Emission) -> None:
        """Split and unroll register-level loops."""

    def before_vectorize(self, step: S, e: Emission) -> None:
        """Rewrite the function (`e.func`) before it is vectorized."""

    def after_vectorize(self, step: S, e: Emission) -> None:
        """Rewrite the vectorized function (`e.func`)."""

    def map_to_gpu(self, step: S, e: GpuEmission) -> None:
        """A GPU strategy's tiling to blocks and threads."""


def settings_of(steps: tuple[tuple[StepKind, Step], ...], resolved: Resolved) -> Settings:
    """The strategy's settings, as the steps configure them in trace order."""
    settings = Settings(fold_unit_dims_via_reshapes=writes_permuted_result(resolved.dag))
    for kind, step in steps:
        settings = kind.configure(step, resolved, settings)
    return settings


def writes_permuted_result(dag: Dag | None) -> bool:
    """Whether an op of the dispatch writes a result through a map that reorders its loops (a transpose)."""
    if dag is None:
        return False
    for op in dag.ops:
        for amap in op.indexing_maps[op.num_inputs:]:
            dims = [d for d in amap.result_dims() if d is not None]
            if dims != sorted(dims):
                return True
    return False

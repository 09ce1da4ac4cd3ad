"""Schedules as traces: sketches (primitives with open decisions) and the candidates that fill them.

A `Sketch` is a typed trace in the sense of TVM's `State` or MetaSchedule's
`Trace`: an ordered list of schedule primitives (`ConfigurePipeline`,
`ImplicitGemm`, `TileAndFuse`, `FuseConsumers`, `Pad`, `Pack`, `Decompose`, `Rfactor`,
`MicroKernel`, `CacheWrite`, `LowerContraction`, ...), each carrying its decisions and their
domains (`TileKnob`: a chain of tile sizes of one loop over the tiling levels;
`ChoiceKnob`: a categorical choice); GPU traces use `MapToGpu`,
`PromoteOperands`, `CrossThreadReduction` and `TensorCore`. A `Candidate` is a sketch with every
decision made. Rules emit sketches, annotation and mutation change decisions,
and `space.resolve` turns a candidate into the concrete loop structure that the
emitter, the validity checks and the features all read. No meaning is carried
by rule names: what a step does is its kind's (`steps`, one module per kind),
found through the trace itself.

Everything here is frozen data that serialises to JSON from the dataclass
fields, so a record can carry its whole trace and be replayed without knowing
which rules derived it; a step kind defined in any module registers itself
(`STEP_KINDS`).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, fields
from enum import Enum
from functools import cache, cached_property
from types import UnionType
from typing import ClassVar, Union, get_args, get_origin, get_type_hints

from ansor_mlir.core.task import IreeConfig

SPATIAL = "S"
REDUCTION = "R"

# IREE CPU tiling levels in Ansor's SSRSRS order (outer to inner).
LEVEL_KIND = {
    "distribution": SPATIAL,
    "cache_parallel": SPATIAL,
    "cache_reduction": REDUCTION,
    "vector_common_parallel": SPATIAL,
    "vector_reduction": REDUCTION,
    "vector_inner_parallel": SPATIAL,
}
LEVEL_ORDER = tuple(LEVEL_KIND)


def is_register_level(level: str) -> bool:
    """A CPU register level (`vector_*`): its tiles live in vector registers, below the cache levels."""
    return level.startswith("vector_")

# IREE GPU tiling levels (`#iree_gpu.lowering_config`), outer to inner: Ansor's GPU structure `SSSRRSRS` has its
# block tile at `workgroup`, its warp tile at `subgroup`, its reduction step (the shared-memory tile) at
# `reduction` (or, split across the threads of a block, `partial_reduction`) and its per-thread tile at `thread`.
GPU_LEVEL_KIND = {
    "workgroup": SPATIAL,
    "subgroup": SPATIAL,
    "reduction": REDUCTION,
    "partial_reduction": REDUCTION,
    "thread": SPATIAL,
}
LEVEL_KIND = {**LEVEL_KIND, **GPU_LEVEL_KIND}


class Family(str, Enum):
    """How a sketch becomes code: IREE pipeline templates whose tile sizes we fill in, or
    transform-dialect strategies that are the codegen themselves."""

    PIPELINE = "pipeline"
    TRANSFORM = "transform"


FAMILIES = tuple(Family)
# The IREE pipeline name a transform sketch stands for (IREE runs the strategy instead of a pipeline).
PIPELINE = "TransformDialectCodegen"


@dataclass(frozen=True)
class TileKnob:
    """Tile sizes of one loop across the levels of its kind, outer to inner.

    Values are chains of divisors: each level's tile divides the one above it
    and the loop extent, so inner tiles are always consistent with outer ones.
    A `padded` knob's innermost (register) tile need not divide the tile above
    it: the strategy pads the partial tiles to it (`transform.structured.pad`),
    so a 109-wide loop can still get whole-vector register tiles. `op` is None
    for a loop of the root; a consumer's own loop (one the root does not have)
    names the consumer's position in the dispatch.
    """

    name: str
    dim: int
    extent: int
    levels: tuple[str, ...]
    padded: bool = False
    op: int | None = None
    # Nonzero: the outermost tile divides this too (an implicit GEMM's K tiles stay within one kernel tap's
    # input channels, so their im2col copies are contiguous vector loads).
    outer_divides: int = 0

    @property
    def outer_bound(self) -> int:
        """The largest outermost tile: the extent, or its common divisor with `outer_divides`."""
        return math.gcd(self.extent, self.outer_divides) if self.outer_divides else self.extent

    @property
    def kind(self) -> str:
        return LEVEL_KIND[self.levels[0]]

    @property
    def of_root(self) -> bool:
        return self.op is None

    def to_dict(self) -> dict:
        aligned = {"outer_divides": self.outer_divides} if self.outer_divides else {}
        return {"tile": self.name, "dim": self.dim, "extent": self.extent, "levels": list(self.levels),
                "padded": self.padded, "op": self.op, **aligned}


@dataclass(frozen=True)
class ChoiceKnob:
    """A categorical decision (vector lowering, fusion level, unroll, ...).

    Its value is a one-element tuple holding the index of the chosen option,
    so every knob value has the same JSON shape as a tile chain.
    """

    name: str
    options: tuple[str, ...]

    def option(self, value: tuple[int, ...]) -> str:
        return self.options[value[0]]

    def to_dict(self) -> dict:
        return {"choice": self.name, "options": list(self.options)}


Knob = TileKnob | ChoiceKnob


def knob_from_dict(data: dict) -> Knob:
    if "choice" in data:
        return ChoiceKnob(str(data["choice"]), tuple(str(o) for o in data["options"]))
    op = data.get("op")
    return TileKnob(str(data["tile"]), int(data["dim"]), int(data["extent"]), tuple(str(lv) for lv in data["levels"]),
                    bool(data.get("padded", False)), None if op is None else int(op),
                    int(data.get("outer_divides", 0)))


def tile_knobs(knobs: tuple[Knob, ...]) -> tuple[TileKnob, ...]:
    return tuple(k for k in knobs if isinstance(k, TileKnob))


# ---- primitives ---------------------------------------------------------------------------------------------


# Every step kind by its JSON name, filled as step classes are defined (`Step.__init_subclass__`), as MetaSchedule
# registers its instruction kinds: a trace replays through this table, whichever module defines the kind.
STEP_KINDS: dict[str, type[Step]] = {}
# Field metadata: the parameter is left out of the step's JSON while it holds its default (traces recorded before
# it existed lack it, and must keep their digest).
OMIT_DEFAULT = {"omit_default": True}


@dataclass(frozen=True)
class Step:
    """One schedule primitive of a trace; `knobs` are the decisions it leaves open, its other fields the
    primitive's fixed parameters. What a kind does (resolve, checks, emission) is its `steps` module's."""

    kind: ClassVar[str] = ""
    knobs: tuple[Knob, ...] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.kind:
            if STEP_KINDS.get(cls.kind, cls) is not cls:
                raise ValueError(f"step kind {cls.kind!r} is defined twice")
            STEP_KINDS[cls.kind] = cls

    def params(self) -> dict:
        """The primitive's fixed parameters (not decisions), for serialisation: every field but `knobs`."""
        return {f.name: _encode(getattr(self, f.name)) for f in fields(self) if f.name != "knobs"
                and not (f.metadata.get("omit_default") and getattr(self, f.name) == f.default)}

    def to_dict(self) -> dict:
        return {"step": self.kind, **self.params(), "knobs": [k.to_dict() for k in self.knobs]}


def _encode(value: object) -> object:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return [_encode(v) for v in value] if isinstance(value, tuple) else value


def _decode(hint: object, value: object) -> object:
    """A JSON value as the field type `hint` holds it (ints, strings, bools, tuples, `X | None`, `from_dict`)."""
    if get_origin(hint) in (Union, UnionType):
        if value is None:
            return None
        (hint,) = (arg for arg in get_args(hint) if arg is not type(None))
    if get_origin(hint) is tuple:
        args = get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v) for v in value)
        return tuple(_decode(a, v) for a, v in zip(args, value, strict=True))
    if hasattr(hint, "from_dict"):
        return hint.from_dict(value)
    return hint(value)


@cache
def _field_types(cls: type[Step]) -> dict[str, object]:
    return get_type_hints(cls)


@dataclass(frozen=True)
class UseIreeDefault(Step):
    """Sketch zero: IREE's own configuration (None where IREE's cannot be set), so tuning never loses to it."""

    kind: ClassVar[str] = "iree-default"
    config: IreeConfig | None = None


@dataclass(frozen=True)
class ConfigurePipeline(Step):
    """An IREE CPU pipeline whose tile sizes per level are the decisions."""

    kind: ClassVar[str] = "configure-pipeline"
    pipeline: str = "DoubleTilingExpert"


@dataclass(frozen=True)
class TileAndFuse(Step):
    """Multi-level tiling of the root (workgroup, cache, register levels in `SSRSRS` order), the last op tiled
    to workgroups with every producer fused into it; consumers' own loops get register tiles too."""

    kind: ClassVar[str] = "tile-and-fuse"


@dataclass(frozen=True)
class FuseConsumers(Step):
    """Where epilogues run: fused into the root's register tiles (`inner`) or after it per workgroup (`outer`).
    Without a knob they run after the root."""

    kind: ClassVar[str] = "fuse-consumers"


@dataclass(frozen=True)
class CacheWrite(Step):
    """Accumulators hoisted out of the reduction loops (or not); without a knob they are hoisted."""

    kind: ClassVar[str] = "cache-write"


@dataclass(frozen=True)
class Rfactor(Step):
    """The innermost reduction split: a vector of partial sums across the reduction loop."""

    kind: ClassVar[str] = "rfactor"


@dataclass(frozen=True)
class Pad(Step):
    """Partial register tiles padded to full static tiles (non-divisor register tiles)."""

    kind: ClassVar[str] = "pad"


@dataclass(frozen=True)
class Pack(Step):
    """The root packed by its register vector tile above the register levels (`[j/nr, k, nr]` panels); a
    transposed operand's panel is transposed in `block x block` tiles (`Target.transpose_block`; 0: one tile
    of `nr` columns, as traces recorded before the block existed were built)."""

    kind: ClassVar[str] = "pack"
    block: int = field(default=0, metadata=OMIT_DEFAULT)


@dataclass(frozen=True)
class PadRows(Step):
    """A dispatch's own input pad (`Task.pads_input`), copied into each workgroup's tile, is copied in rows of
    its two innermost dimensions holding at most `elements` values (half the target's vector registers: a row
    is loaded whole, then stored); 0: rows of its innermost dimension alone, as traces recorded before the
    step existed were built."""

    kind: ClassVar[str] = "pad-rows"
    elements: int = 0


@dataclass(frozen=True)
class Decompose(Step):
    """A 2-D convolution's register tile decomposed into a 1-D convolution (several output pixels per tile)."""

    kind: ClassVar[str] = "decompose"


@dataclass(frozen=True)
class ImplicitGemm(Step):
    """A convolution rewritten before tiling into an implicit GEMM: its window loops and input channels
    collapse into one reduction loop `K` over an im2col tile of the input (IREE's `im2col` op, tiled with the
    root and copied per tile), so strided, dilated and grouped windows become a plain contraction."""

    kind: ClassVar[str] = "implicit-gemm"


@dataclass(frozen=True)
class MicroKernel(Step):
    """The root's register tile as an outer-product micro-kernel: `mr` rows of loop `rows` by `nr` columns
    of the vector loop `cols`, one of the knob's `MRxNR` options (shapes whose accumulators fill the vector
    register file without spilling); every other loop is unit at the register level."""

    kind: ClassVar[str] = "micro-kernel"
    rows: int = 0
    cols: int = 0
    # `rows` is a window loop (output pixels read through strided or dilated windows): no vector spans it, so
    # the strategy tiles it to single rows inside the reduction loops and unrolls them. (A stride-1 window's
    # rows are split the same way by the strategy, without this flag: their register shapes are a GEMM's.)
    unrolled: bool = field(default=False, metadata=OMIT_DEFAULT)


def micro_kernel_shape(option: str) -> tuple[int, int]:
    """`(mr, nr)` of a micro-kernel option `"8x32"`."""
    mr, nr = option.split("x")
    return int(mr), int(nr)


@dataclass(frozen=True)
class LowerContraction(Step):
    """How vector contractions are lowered (the knob's options)."""

    kind: ClassVar[str] = "lower-contraction"


@dataclass(frozen=True)
class LowerReduction(Step):
    """How vector multi-reductions are lowered (the knob's options)."""

    kind: ClassVar[str] = "lower-reduction"


@dataclass(frozen=True)
class MapToGpu(Step):
    """Block and thread mapping of the root's tiles (IREE's GPU pipeline `pipeline`): each parallel loop's tile
    per block (`workgroup`) and per thread (`thread`), each reduction loop's step (`reduction`); a block has
    `workgroup / thread` threads per loop, run in warps of `subgroup_size`."""

    kind: ClassVar[str] = "gpu-map"
    pipeline: str = "TileAndFuse"
    subgroup_size: int = 32


@dataclass(frozen=True)
class PromoteOperands(Step):
    """Cache read: the root's input tiles of one reduction step staged in shared memory (IREE's
    `promote_operands`); the knob chooses whether, without one they always are."""

    kind: ClassVar[str] = "promote-operands"


@dataclass(frozen=True)
class CrossThreadReduction(Step):
    """A reduction split across the threads of a block (IREE's `VectorDistribute`): `warps` warps of
    `subgroup_size` lanes, each lane reading `vector` contiguous elements `unroll` times per step, then combined
    across lanes and warps; `rows` outputs per block. For reductions whose outputs are too few to fill the GPU."""

    kind: ClassVar[str] = "cross-thread-reduction"
    subgroup_size: int = 32


@dataclass(frozen=True)
class TensorCore(Step):
    """A contraction on tensor cores: one of the `mma_kind` instructions (shapes `mnk`, in the knob's option
    order), each warp a `subgroup_m x subgroup_n` grid of them, `warps_m x warps_n` warps per block, `k_tiles`
    instructions deep per reduction step; loops `m`, `n`, `k` are the root's."""

    kind: ClassVar[str] = "tensor-core"
    mnk: tuple[tuple[int, int, int], ...] = ()
    m: int = 0
    n: int = 1
    k: int = 2


def step_from_dict(data: dict) -> Step:
    """A step from its JSON (`Step.to_dict`): the kind's class by name, its parameters by the fields' types."""
    cls = STEP_KINDS.get(str(data.get("step")))
    if cls is None:
        raise ValueError(f"unknown schedule primitive {data.get('step')!r}")
    knobs = tuple(knob_from_dict(k) for k in data.get("knobs", ()))
    types = _field_types(cls)
    params = {f.name: _decode(types[f.name], data[f.name]) for f in fields(cls) if f.name != "knobs" and f.name in data}
    return cls(knobs, **params)


# ---- sketches and candidates -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sketch:
    """One program structure for a task: a trace of primitives whose knobs are still open.

    `index` is the sketch's position among the task's sketches in this run
    (for display and de-duplication); `rules` names the derivation rules that
    produced it, for people only: no code reads it.
    """

    task_key: str
    index: int
    family: Family
    pipeline: str
    levels: tuple[str, ...]
    steps: tuple[Step, ...]
    rules: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"s{self.index}"

    @cached_property
    def knobs(self) -> tuple[Knob, ...]:
        return tuple(k for step in self.steps for k in step.knobs)

    @property
    def fixed_config(self) -> IreeConfig | None:
        """IREE's own configuration, for sketch zero."""
        default = self.step(UseIreeDefault)
        return default.config if default else None

    @property
    def is_default(self) -> bool:
        return self.has(UseIreeDefault)

    def has(self, kind: type[Step]) -> bool:
        return any(isinstance(step, kind) for step in self.steps)

    def step(self, kind: type[Step]) -> Step | None:
        return next((step for step in self.steps if isinstance(step, kind)), None)

    def knob(self, name: str) -> Knob | None:
        return next((k for k in self.knobs if k.name == name), None)

    def trace(self) -> dict:
        """The structure alone (what a record replays): family, pipeline, levels, primitives."""
        return {"family": self.family.value, "pipeline": self.pipeline, "levels": list(self.levels),
                "steps": [s.to_dict() for s in self.steps]}

    @cached_property
    def digest(self) -> str:
        """A short hash of the trace: equal structures, equal digests, whatever rules derived them."""
        text = json.dumps(self.trace(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @staticmethod
    def from_trace(data: dict, task_key: str, index: int = -1, rules: tuple[str, ...] = ()) -> Sketch:
        return Sketch(task_key, index, Family(data["family"]), str(data["pipeline"]),
                      tuple(str(lv) for lv in data["levels"]), tuple(step_from_dict(s) for s in data["steps"]),
                      tuple(rules))


@dataclass(frozen=True)
class Candidate:
    """A complete program: a sketch of a task with every hole filled."""

    task_key: str
    sketch_index: int
    values: tuple[tuple[str, tuple[int, ...]], ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return {
            "task": self.task_key,
            "sketch": self.sketch_index,
            "values": {name: list(v) for name, v in self.values},
        }

    @staticmethod
    def from_dict(data: dict) -> Candidate:
        values = tuple(sorted((str(k), tuple(int(x) for x in v)) for k, v in data["values"].items()))
        return Candidate(str(data["task"]), int(data["sketch"]), values)

    @property
    def identity(self) -> str:
        """A stable string identifying the candidate (for de-duplication)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def choice(self, knob: ChoiceKnob) -> str | None:
        """The option chosen for a knob, None when the candidate's sketch has no such knob."""
        value = dict(self.values).get(knob.name)
        return knob.option(value) if value is not None else None

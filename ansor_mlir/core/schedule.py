"""Sketches: program structures with holes (knobs), and the candidates that fill them.

A sketch fixes the structure (pipeline, which tiling levels exist) of one
task's program; its knobs are the holes. A `Candidate` is a sketch plus one
value per knob. Both are frozen, JSON-serialisable, and a candidate always
renders the byte-identical configuration and tuning spec.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

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

# Sketch families: IREE pipeline templates whose tile sizes we fill in, or
# transform-dialect strategies that are the codegen themselves.
PIPELINE_FAMILY = "pipeline"
TRANSFORM_FAMILY = "transform"
FAMILIES = (PIPELINE_FAMILY, TRANSFORM_FAMILY)
# The IREE pipeline name a transform sketch stands for (IREE runs the strategy instead of a pipeline).
PIPELINE = "TransformDialectCodegen"


@dataclass(frozen=True)
class TileKnob:
    """Tile sizes of one loop across the levels of its kind, outer to inner.

    Values are chains of divisors: each level's tile divides the one above it
    and the loop extent, so inner tiles are always consistent with outer ones.
    A `padded` knob's innermost (register) tile need not divide the tile above
    it: the strategy pads the partial tiles to it (`transform.structured.pad`),
    so a 109-wide loop can still get whole-vector register tiles.
    """

    name: str
    dim: int
    extent: int
    levels: tuple[str, ...]
    padded: bool = False

    @property
    def kind(self) -> str:
        return LEVEL_KIND[self.levels[0]]


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


Knob = TileKnob | ChoiceKnob


def tile_knobs(knobs: tuple[Knob, ...]) -> tuple[TileKnob, ...]:
    return tuple(k for k in knobs if isinstance(k, TileKnob))


@dataclass(frozen=True)
class Sketch:
    """One program structure for a task, derived by a sequence of rules."""

    task_key: str
    index: int
    pipeline: str
    levels: tuple[str, ...]
    knobs: tuple[Knob, ...]
    rules: tuple[str, ...]
    # Sketch zero reuses IREE's own configuration and has no knobs.
    fixed_config: IreeConfig | None = None
    family: str = PIPELINE_FAMILY

    @property
    def name(self) -> str:
        return f"s{self.index}"


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

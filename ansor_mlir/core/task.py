"""A `Task`: one unique IREE dispatch, the unit the tuner schedules.

A task is data only: the standalone linalg function that reproduces the
dispatch, facts about its root op, and IREE's own default configuration of
it (sketch zero). It is built by `task_extraction` and read everywhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import prod

from ansor_mlir.core.affine import AffineMap


@dataclass(frozen=True)
class GpuLaunch:
    """What an IREE GPU configuration holds besides tile sizes: the block shape and how operands are handled.

    `lane_basis` and `subgroup_basis` are IREE's `[counts, mapping]` pairs
    (how `VectorDistribute` spreads a reduction's lanes and warps over its
    loops), empty when unused; `mma_kind` an `iree_gpu.MMAIntrinsic` name.
    """

    workgroup_size: tuple[int, ...]
    subgroup_size: int
    mma_kind: str = ""
    promote_operands: tuple[int, ...] = ()
    lane_basis: tuple[tuple[int, ...], ...] = ()
    subgroup_basis: tuple[tuple[int, ...], ...] = ()
    prefetch_stages: int = 0

    def to_dict(self) -> dict:
        return {"workgroup_size": list(self.workgroup_size), "subgroup_size": self.subgroup_size,
                "mma_kind": self.mma_kind, "promote_operands": list(self.promote_operands),
                "lane_basis": [list(b) for b in self.lane_basis],
                "subgroup_basis": [list(b) for b in self.subgroup_basis], "prefetch_stages": self.prefetch_stages}

    @staticmethod
    def from_dict(data: dict) -> GpuLaunch:
        return GpuLaunch(tuple(int(x) for x in data["workgroup_size"]), int(data["subgroup_size"]),
                         str(data.get("mma_kind", "")), tuple(int(x) for x in data.get("promote_operands", ())),
                         tuple(tuple(int(x) for x in b) for b in data.get("lane_basis", ())),
                         tuple(tuple(int(x) for x in b) for b in data.get("subgroup_basis", ())),
                         int(data.get("prefetch_stages", 0)))


@dataclass(frozen=True)
class IreeConfig:
    """An IREE configuration: pipeline plus tile sizes per tiling level (and, on a GPU, its launch).

    `levels` maps an IREE level name (`distribution`, `cache_parallel`, ...
    on CPUs; `workgroup`, `reduction`, `thread`, ... on GPUs) to one tile
    size per loop of the root op, as IREE prints them. `gpu` is None for a
    CPU pipeline (`#iree_cpu.pipeline`), set for a GPU one (`#iree_gpu.pipeline`).
    """

    pipeline: str
    levels: tuple[tuple[str, tuple[int, ...]], ...]
    gpu: GpuLaunch | None = None

    def level(self, name: str) -> tuple[int, ...] | None:
        return dict(self.levels).get(name)

    def to_dict(self) -> dict:
        data: dict = {"pipeline": self.pipeline, "levels": {k: list(v) for k, v in self.levels}}
        if self.gpu is not None:
            data["gpu"] = self.gpu.to_dict()
        return data

    @staticmethod
    def from_dict(data: dict) -> IreeConfig:
        gpu = data.get("gpu")
        return IreeConfig(
            pipeline=data["pipeline"],
            levels=tuple((k, tuple(v)) for k, v in data["levels"].items()),
            gpu=GpuLaunch.from_dict(gpu) if gpu else None,
        )


@dataclass(frozen=True)
class RootOp:
    """Structure of the dispatch's root linalg op, as IREE configures it."""

    name: str
    loop_extents: tuple[int, ...]
    iterator_types: tuple[str, ...]
    indexing_maps: tuple[AffineMap, ...]
    operand_types: tuple[str, ...]
    element_type: str
    element_bytes: int
    body_ops: tuple[str, ...]

    @property
    def parallel_dims(self) -> tuple[int, ...]:
        return tuple(i for i, t in enumerate(self.iterator_types) if t == "parallel")

    @property
    def reduction_dims(self) -> tuple[int, ...]:
        return tuple(i for i, t in enumerate(self.iterator_types) if t == "reduction")

    @property
    def is_contraction_like(self) -> bool:
        return bool(self.reduction_dims)


@dataclass(frozen=True)
class LinalgOpInfo:
    """One linalg op of the dispatch as IREE's codegen sees it (after its own rewrites).

    Transform-dialect strategies run on this form, which can differ from the
    task function (IREE re-inserts a unit batch dimension into batch-1
    convolutions), so the strategy rules read these, not the task's ops.
    `producers` holds, per operand, the index of the linalg op defining it
    (-1 for a dispatch input or a non-linalg value).
    """

    name: str
    extents: tuple[int, ...]
    iterator_types: tuple[str, ...]
    indexing_maps: tuple[AffineMap, ...]
    num_inputs: int
    producers: tuple[int, ...]
    body_ops: tuple[str, ...]

    @property
    def is_fill(self) -> bool:
        return self.name == "linalg.fill"

    @property
    def reduction_dims(self) -> tuple[int, ...]:
        return tuple(i for i, t in enumerate(self.iterator_types) if t == "reduction")


@dataclass(frozen=True)
class Task:
    """One unique dispatch: what to tune, how often it runs, what it costs."""

    key: str
    name: str
    func_text: str
    func_name: str
    input_types: tuple[str, ...]
    output_types: tuple[str, ...]
    ops: tuple[str, ...]
    root: RootOp
    # Position of the root among the dispatch's compute (non-fill) linalg ops.
    root_index: int
    flops: int
    weight: int
    default_config: IreeConfig | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # The dispatch's linalg ops as IREE codegen sees them (for transform strategies).
    codegen_ops: tuple[LinalgOpInfo, ...] = field(default_factory=tuple)
    # The dispatch stores a result into part of an output (a consumer's pad folded into the store, which task
    # extraction rebuilds as an `insert_slice` into zeros).
    stores_into_slice: bool = False

    @property
    def tunable(self) -> bool:
        """Some sketch family can configure it: IREE's pipelines or a transform strategy."""
        return self.default_config is not None or bool(self.codegen_ops)

    @property
    def pads_input(self) -> bool:
        """The dispatch pads an input itself (`frontend.pad_fusion`): strategies fuse the pad into the
        workgroup tile, whose padded input is then a stack buffer."""
        return "tensor.pad" in self.func_text

    def with_weight(self, weight: int) -> Task:
        return Task(**{**self.__dict__, "weight": weight})


def main_task(tasks: Sequence[Task]) -> Task:
    """The task doing a workload's real work: its root has reductions and the most loop iterations.

    A convolution, contraction or reduction wins over the pads, transposes
    and weight flips dispatched around it, whatever their element counts.
    """
    if not tasks:
        raise ValueError("no tasks to choose from")
    return max(tasks, key=lambda t: (bool(t.root.reduction_dims), prod(t.root.loop_extents), t.flops))

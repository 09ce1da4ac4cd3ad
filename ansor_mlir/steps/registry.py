"""Every step kind's behaviour, by the step class it replays (MetaSchedule's instruction-kind registry).

A new kind adds its module to `KINDS`; `tests/py/test_step_kinds.py` checks that every step class of
`core.schedule.STEP_KINDS` has exactly one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

from ansor_mlir.core.schedule import Sketch, Step
from ansor_mlir.steps.cache_write import CacheWriteKind
from ansor_mlir.steps.checks import Check
from ansor_mlir.steps.configure_pipeline import ConfigurePipelineKind
from ansor_mlir.steps.cross_thread_reduction import CrossThreadReductionKind
from ansor_mlir.steps.decompose import DecomposeKind
from ansor_mlir.steps.fuse_consumers import FuseConsumersKind
from ansor_mlir.steps.implicit_gemm import ImplicitGemmKind
from ansor_mlir.steps.interchange import InterchangeKind
from ansor_mlir.steps.lower_contraction import LowerContractionKind
from ansor_mlir.steps.lower_reduction import LowerReductionKind
from ansor_mlir.steps.map_to_gpu import MapToGpuKind
from ansor_mlir.steps.micro_kernel import MicroKernelKind
from ansor_mlir.steps.pack import PackKind
from ansor_mlir.steps.pad import PadKind
from ansor_mlir.steps.pad_rows import PadRowsKind
from ansor_mlir.steps.promote_operands import PromoteOperandsKind
from ansor_mlir.steps.rfactor import RfactorKind
from ansor_mlir.steps.step_kind import StepKind
from ansor_mlir.steps.tensor_core import TensorCoreKind
from ansor_mlir.steps.tile_and_fuse import TileAndFuseKind
from ansor_mlir.steps.use_iree_default import UseIreeDefaultKind

T = TypeVar("T")

KINDS: dict[type[Step], StepKind] = {kind.step: kind for kind in (
    UseIreeDefaultKind(), ConfigurePipelineKind(), TileAndFuseKind(), FuseConsumersKind(), CacheWriteKind(),
    RfactorKind(), PadKind(), PackKind(), PadRowsKind(), DecomposeKind(), ImplicitGemmKind(), MicroKernelKind(),
    LowerContractionKind(), LowerReductionKind(), MapToGpuKind(), PromoteOperandsKind(), CrossThreadReductionKind(),
    TensorCoreKind(), InterchangeKind(),
)}


def kind_of(step: Step) -> StepKind:
    """The behaviour of `step`'s kind."""
    kind = KINDS.get(type(step))
    if kind is None:
        raise ValueError(f"schedule step {step.kind!r} has no registered kind (steps.registry.KINDS)")
    return kind


# Per trace (by identity: the entry holds the steps tuple, so its id is not reused while cached), what the
# drivers ask of it on every candidate.
_MEMO: dict[tuple[str, int], tuple[tuple[Step, ...], object]] = {}
MEMO_SIZE = 4096


def _memo(what: str, steps: tuple[Step, ...], make: Callable[[], T]) -> T:
    hit = _MEMO.get((what, id(steps)))
    if hit is not None and hit[0] is steps:
        return cast(T, hit[1])
    value = make()
    if len(_MEMO) >= MEMO_SIZE:
        _MEMO.clear()
    _MEMO[(what, id(steps))] = (steps, value)
    return value


def kinds_of(sketch: Sketch) -> tuple[tuple[StepKind, Step], ...]:
    """Each step of the sketch's trace with its kind, in trace order."""
    return _memo("kinds", sketch.steps, lambda: tuple((kind_of(step), step) for step in sketch.steps))


def checks_of(sketch: Sketch) -> tuple[Check, ...]:
    """The checks a candidate of the sketch must pass: each step's, in trace order, once each, less those a step
    of the trace makes unnecessary (`StepKind.waives`)."""

    def collect() -> tuple[Check, ...]:
        steps = kinds_of(sketch)
        waived = {check for kind, _ in steps for check in kind.waives}
        checks: list[Check] = []
        for kind, _ in steps:
            checks += [check for check in kind.checks if type(check) not in waived and check not in checks]
        return tuple(checks)

    return _memo("checks", sketch.steps, collect)

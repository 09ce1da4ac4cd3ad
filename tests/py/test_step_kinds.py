"""Every step kind owns its behaviour: one registered kind per step class, an emitter for each, serialization from
the dataclass fields, and validity checks that are units of their own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest
from conftest import PINNED_CPUS, matmul_bias_relu, pinned_target

from ansor_mlir.core.schedule import (
    STEP_KINDS,
    Family,
    MicroKernel,
    Pack,
    PadRows,
    Sketch,
    Step,
    TileAndFuse,
    UseIreeDefault,
    step_from_dict,
)
from ansor_mlir.core.task import IreeConfig, main_task
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.space.annotation import is_valid, sketch_checks
from ansor_mlir.space.resolve import resolve
from ansor_mlir.space.sketch_rules import PadRowsRule, cpu_rules, generate_sketches
from ansor_mlir.steps.checks import (
    REGISTER_TILE_CHECKS,
    AccumulatorLimit,
    CheckContext,
    InteriorUnitDims,
    StackLimit,
    VectorSizeLimit,
    WholeVectors,
)
from ansor_mlir.steps.micro_kernel import MicroKernelFits
from ansor_mlir.steps.registry import KINDS, kind_of
from ansor_mlir.steps.step_kind import PHASES, StepKind

# Hooks through which a kind emits: the strategy phases and their per-level and per-op hooks, the settings of the
# strategy's fixed parts, the IREE configuration, the GPU strategy.
EMISSION_HOOKS = (*PHASES, "prepare", "level_tiling", "before_level", "after_root_tile", "after_chain_tile",
                  "after_fill_tile", "before_vectorize", "after_vectorize", "configure", "config", "map_to_gpu")
RESOLVE_HOOKS = ("rewrite_dag", "forced_units", "fixed_tiles", "refine", "stack_bytes", "config")


def overridden(kind: StepKind, hooks: tuple[str, ...]) -> list[str]:
    return [hook for hook in hooks if getattr(type(kind), hook) is not getattr(StepKind, hook)]


def test_every_step_kind_has_one_registered_behaviour():
    assert set(KINDS) == set(STEP_KINDS.values())
    assert all(KINDS[cls].step is cls for cls in KINDS)


@pytest.mark.parametrize("cls", sorted(STEP_KINDS.values(), key=lambda c: c.kind), ids=lambda c: c.kind)
def test_every_step_kind_emits_or_names_its_emitter(cls):
    kind = KINDS[cls]
    emitters = overridden(kind, EMISSION_HOOKS)
    assert emitters or kind.emitted_by, f"{cls.kind}: no emission hook and no emitted_by"
    assert all(KINDS[other].step is other for other in kind.emitted_by)


def test_the_phases_are_hooks_of_every_kind():
    assert all(callable(getattr(StepKind, phase)) for phase in PHASES)
    hooked = {hook for kind in KINDS.values() for hook in overridden(kind, EMISSION_HOOKS + RESOLVE_HOOKS)}
    assert set(PHASES) <= hooked  # every phase is some kind's


def test_kinds_checks_are_named_units():
    for kind in KINDS.values():
        names = [type(check).__name__ for check in kind.checks]
        assert len(names) == len(set(names)) and all(callable(check) for check in kind.checks)
    assert KINDS[TileAndFuse].checks == REGISTER_TILE_CHECKS


def test_serialization_comes_from_the_fields():
    config = IreeConfig("Default", (("distribution", (1, 2)),))
    steps = [UseIreeDefault((), config), UseIreeDefault(), Pack(), Pack(block=4), PadRows(elements=0),
             MicroKernel((), 1, 2), MicroKernel((), 1, 2, unrolled=True)]
    for step in steps:
        assert step_from_dict(step.to_dict()) == step
    # Defaults marked OMIT_DEFAULT stay out of the JSON (older traces lack them and keep their digest).
    assert "block" not in Pack().to_dict() and Pack(block=4).to_dict()["block"] == 4
    assert "unrolled" not in MicroKernel((), 1, 2).to_dict() and PadRows().to_dict()["elements"] == 0
    assert list(MicroKernel((), 1, 2).to_dict()) == ["step", "rows", "cols", "knobs"]


def test_a_step_kind_defined_anywhere_registers_itself_and_round_trips():
    @dataclass(frozen=True)
    class Probe(Step):
        kind: ClassVar[str] = "test-probe"
        level: str = "cache_parallel"
        sizes: tuple[int, ...] = ()

    try:
        assert STEP_KINDS["test-probe"] is Probe
        probe = Probe((), "vector_reduction", (2, 3))
        assert probe.to_dict() == {"step": "test-probe", "level": "vector_reduction", "sizes": [2, 3], "knobs": []}
        assert step_from_dict(probe.to_dict()) == probe
        with pytest.raises(ValueError, match="no registered kind"):
            kind_of(probe)
    finally:
        del STEP_KINDS["test-probe"]
    with pytest.raises(ValueError, match="unknown schedule primitive"):
        step_from_dict({"step": "test-probe"})


@pytest.fixture(scope="module")
def mm():
    target = pinned_target(PINNED_CPUS[0])  # AVX2: 8 lanes, 16 ymm
    task = main_task(extract_tasks(matmul_bias_relu(256, 128, 64), target, "mm"))
    cached = next(s for s in generate_sketches(task, target) if s.rules == ("td-multi-level-tiling-cached",))
    return target, task, cached


def context(mm, **tiles: tuple[int, ...]) -> CheckContext:
    target, task, sketch = mm
    values = {k.name: tiles.get(k.name, (0,)) for k in sketch.knobs}
    return CheckContext(sketch, values, task, target, resolve)


GOOD = {"d0": (16, 8, 4), "d1": (64, 32, 16), "d2": (64, 1), "consumer_fusion": (1,)}


def test_each_register_tile_check_judges_alone(mm):
    good = context(mm, **GOOD)
    assert all(check(good) for check in REGISTER_TILE_CHECKS)
    # 8 x 64 accumulators: 16 ymm, more than AVX2 leaves for them.
    many = context(mm, **{**GOOD, "d0": (16, 8, 8), "d1": (64, 64, 64)})
    assert not AccumulatorLimit()(many) and VectorSizeLimit()(many)
    # A register tile of 4 columns is no whole number of 8-lane vectors.
    assert not WholeVectors()(context(mm, **{**GOOD, "d1": (64, 32, 4)}))
    # One workgroup over the whole 256x128 output: its output tile would be a 128 KiB stack buffer.
    assert not StackLimit()(context(mm, **{**GOOD, "d0": (256, 8, 4), "d1": (128, 32, 16)}))
    # A 128x128 workgroup tile is a stack buffer (64 KiB) only when the consumers run after the root.
    big = {**GOOD, "d0": (128, 8, 4), "d1": (128, 32, 16)}
    assert not StackLimit()(context(mm, **big)) and StackLimit()(context(mm, **{**big, "consumer_fusion": (0,)}))
    assert not InteriorUnitDims()(context(mm, **{**GOOD, "d1": (64, 32, 1)}))


def test_a_sketch_checks_are_its_steps_in_trace_order_less_the_waived(mm):
    target, task, cached = mm
    assert sketch_checks(cached) == REGISTER_TILE_CHECKS
    packed = next(s for s in generate_sketches(main_task(extract_tasks(
        matmul_bias_relu(64, 64, 64, transpose_b=True), target, "mmt")), target) if s.has(Pack) and s.has(MicroKernel))
    checks = sketch_checks(packed)
    assert InteriorUnitDims() not in checks and MicroKernelFits() in checks
    assert checks.count(VectorSizeLimit()) == 1  # listed by two kinds, run once
    assert is_valid(cached, context(mm, **GOOD).values, task, target)


def test_pad_rows_is_a_rule_of_the_list():
    rules = cpu_rules()
    assert isinstance(rules[-1], PadRowsRule)
    target = pinned_target(PINNED_CPUS[0])
    task = main_task(extract_tasks(matmul_bias_relu(64, 64, 64), target, "mm"))
    assert not PadRowsRule().applies(task, target)  # the task does not pad its own input
    sketch = next(s for s in generate_sketches(task, target) if s.family is Family.TRANSFORM)
    refined = PadRowsRule().refine(task, target, [sketch])
    assert refined[0].steps[-1] == PadRows(elements=target.pad_row_elements(4)) and isinstance(refined[0], Sketch)

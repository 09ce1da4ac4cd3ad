"""`Pad`: partial register tiles padded to full static tiles (`transform.structured.pad`), so whole-vector tiles
run over loops they do not divide (a 109-wide output).

The root is padded along its parallel loops before its reduction loops are
tiled (the accumulator tile is padded once, outside the reduction loop), and
along its reduction loops inside it; the other ops' partial tiles are padded
too, and the pads vectorized into out-of-bounds (masked) reads and writes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ansor_mlir.core.schedule import Pad, tile_knobs
from ansor_mlir.space.dag import output_dims
from ansor_mlir.space.decisions import FUSION
from ansor_mlir.space.resolved import Resolved, has_interior_unit_dim, input_tiles
from ansor_mlir.steps.checks import CheckContext
from ansor_mlir.steps.step_kind import Emission, Settings, StepKind


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def padded_tiles_are_sound(resolved: Resolved, lanes: int, stack_bytes: int) -> bool:
    """Register tiles of a padded sketch: within the tile above (or that tile rounded up to whole
    vectors: 109 -> 112, never 1 -> 16), padded operand panels within IREE's stack limit `stack_bytes`
    (GMM 109^3: a 109x80 panel of B needed 34 KiB of 32), and no operand tile with an interior unit dimension.

    Padding materialises every operand tile of the root (`tensor<1x4x1xf32>`
    for a 4-row, 1-deep matmul tile), and such a tile hits the same
    `transfer_write` folding bug as an output tile (`has_interior_unit_dim`):
    wrong answers, seen on GMM 109^3 with a 4x32x1 tile. Consumers are
    computed after the root (`consumer_fusion = outer`): fused into the padded
    register tile, their input pad bufferizes to a stack buffer inside the loop,
    which IREE rejects ("all stack allocations need to be hoisted").
    """
    if resolved.choice(FUSION) == "inner":
        return False
    values = dict(resolved.candidate.values)
    for knob in tile_knobs(resolved.sketch.knobs):
        chain = values[knob.name]
        bound = chain[-2] if len(chain) > 1 else knob.extent
        rounded = bound >= lanes and chain[-1] == round_up(bound, lanes)
        if chain[-1] > bound and not rounded:
            return False
    if resolved.padded_panel_bytes > stack_bytes:
        return False
    return not any(has_interior_unit_dim(t) for t in input_tiles(resolved))


@dataclass(frozen=True)
class PaddedTilesSound:
    """`padded_tiles_are_sound` over the target's lanes and stack limit."""

    def __call__(self, ctx: CheckContext) -> bool:
        return padded_tiles_are_sound(ctx.resolved, ctx.lanes, ctx.limits.stack_bytes)


@dataclass(frozen=True)
class SlicedStoreRows:
    """In a dispatch that stores into part of its output (a consumer's pad folded into the store,
    `Task.stores_into_slice`), the padded register tile spans more than one row (the output's second-innermost
    loop): padded `[., 1, 16]` tiles of a channels-first 1x1 convolution before a padded 3x3 one left the stored
    interior unwritten (NaN, IREE 3.13: ResNet-50's, and `test_sliced_store.py`'s), where `[., 2, 16]` are right."""

    def __call__(self, ctx: CheckContext) -> bool:
        if not ctx.task.stores_into_slice:
            return True
        resolved = ctx.resolved
        outputs = [d for d in output_dims(resolved.root) if d is not None]
        if len(outputs) < 2:
            return True
        row = outputs[-2]
        return resolved.register[row] > 1 or resolved.root.extents[row] == 1


class PadKind(StepKind[Pad]):
    step = Pad
    checks = (PaddedTilesSound(), SlicedStoreRows())
    fill_fusable = False  # the fill's tiles are padded on their own

    def configure(self, step: Pad, resolved: Resolved, settings: Settings) -> Settings:
        # Pads that stay materialised (a fused consumer's input tile) bufferize to stack buffers in the loop.
        return replace(settings, vectorize_padding=True, hoist_static_alloc=True)

    def before_level(self, step: Pad, e: Emission, level: str) -> None:
        if level == "vector_reduction":
            parallel = [d for d, it in enumerate(e.root.iterator_types) if it == "parallel"]
            self._pad_root(e, parallel)

    def after_root(self, step: Pad, e: Emission) -> None:
        if e.root.reduction_dims:
            self._pad_root(e, list(e.root.reduction_dims))

    def tile_others(self, step: Pad, e: Emission) -> None:
        for i, op in enumerate(e.dag.ops):
            if i not in (e.dag.root, e.fill):
                e.handles[i] = e.script.pad(e.handles[i], op, e.task.root.element_type, list(range(len(op.extents))))

    @staticmethod
    def _pad_root(e: Emission, dims: list[int]) -> None:
        root = e.dag.root
        e.handles[root] = e.script.pad(e.handles[root], e.root, e.task.root.element_type, dims)

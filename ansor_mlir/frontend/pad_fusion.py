"""Pad fusion: a window op that reduces over its window only gets its input's padding in its own dispatch.

IREE gives every `tensor.pad` a dispatch of its own: the padded input is
written to memory and read back by the convolution. For a convolution that
reduces over input channels this costs little beside its FLOPs, and IREE's
schedules of the fused form are slower. A window op that reduces over its
window only (depthwise convolutions, pooling) does a few FLOPs per input
element, so the extra pass over memory is a large share of its time: fused,
IREE's own configuration of a depthwise convolution runs faster, before any
tuning (measured: docs/reports/program_rewrites.md).

The match reads loop structure, never op names: a linalg op whose reduction
loops each appear in its input map only added to an output loop (`oh + kh`,
never alone, as an input-channel loop would), whose input is a `tensor.pad`
used by it alone. The pad, the op's initializer (a `linalg.fill` of a
`tensor.empty`, when used by it alone) and the op go into one
`flow.dispatch.region`, which IREE keeps as one dispatch.

`conv1d-pad-fusion` also takes ops that reduce over input channels, where
the window spans one dimension (1-D convolutions): on IREE's task system the
separate pad is a fill and a copy of the whole input, each a step the
workers finish and wait on before the convolution starts. Over 2-D windows
the fused search loses: the sketches that win unfused do not apply to a
dispatch that pads its own input, and strategies that pad each workgroup's
input tile in a stack buffer fail to compile; so 2-D windows over channels
keep their pad dispatch. IREE's default of a fused form can be much slower
(measured: docs/reports/program_rewrites.md), so the rewrite is opt-in and
`tuning.rewrite_check` keeps it only where the tuned program wins (and
builds). Where IREE's default of a fused dispatch does not build at all (a
padded tile over the 32 KB stack limit), the tuner takes its reference
from the task with the pad split off (`tuning.tuner`). A grouped
convolution's pad -> channel split becomes split -> pad
(`pad_after_expand`), so that its pad can feed the convolution.
"""

from __future__ import annotations

from collections.abc import Callable

from iree.compiler import ir
from iree.compiler.dialects import linalg, tensor

from ansor_mlir.core.affine import AffineMap
from ansor_mlir.frontend.affine_maps import affine_map_from_ir
from ansor_mlir.frontend.dispatch_regions import REGION, wrap_in_dispatch_region
from ansor_mlir.frontend.tensor_ir import erase_unused, pad_with_zeros, pads_with_zero, static_tensor
from ansor_mlir.mlir.context import ancestors, producer, walk

NAME = "pad-fusion"
CONV1D_NAME = "conv1d-pad-fusion"
# The rewrites whose flow-level output builds only with `mlir.iree_compiler.FLOW_PAD_FLAG`.
NAMES = (NAME, CONV1D_NAME)


def fuse_pads_into_window_ops(module: ir.Module) -> int:
    """Put every op reducing over a window only and its input's pad into one dispatch region; how many were."""
    return _fuse(module, reduces_over_window_only)


def fuse_pads_into_1d_convolutions(module: ir.Module) -> int:
    """Put every op reading a one-dimensional window (input-channel reductions included) and its input's pad into
    one dispatch region; how many were."""
    return _fuse(module, reads_a_1d_window)


def _fuse(module: ir.Module, matches_maps: Callable[[AffineMap, AffineMap], bool]) -> int:
    for op in list(walk(module.operation)):
        if _maps_match(op, matches_maps):
            pad_after_expand(op.operands[0])
    matches = [found for found in (match_padded_window_op(op, matches_maps) for op in list(walk(module.operation)))
               if found]
    for ops in matches:
        wrap_in_dispatch_region(ops, [ops[-1].results[0]])
    return len(matches)


def match_padded_window_op(op: ir.Operation, matches_maps: Callable[[AffineMap, AffineMap], bool] | None = None,
                           ) -> list[ir.Operation] | None:
    """The ops to fuse (pad, initializer ops, `op`) when `op` reads a padded input and its (input, output) maps
    pass `matches_maps` (default: it reduces over a window only)."""
    if not _maps_match(op, matches_maps or reduces_over_window_only):
        return None
    pad = producer(op.operands[0])
    if pad is None or pad.name != "tensor.pad" or not _used_once(pad.results[0]):
        return None
    if any(not isinstance(v.type, ir.RankedTensorType) or not ir.RankedTensorType(v.type).has_static_shape
           for v in (*op.operands, op.results[0])):
        return None
    return [pad, *_initializer(op.operands[-1]), op]


def _maps_match(op: ir.Operation, matches_maps: Callable[[AffineMap, AffineMap], bool]) -> bool:
    """A one-result linalg op outside any dispatch region whose (first input, output) maps pass `matches_maps`."""
    raw_maps = linalg.get_indexing_maps(op) if op.name.startswith("linalg.") else None
    if raw_maps is None or len(op.results) != 1 or len(op.operands) < 2 or _in_region(op):
        return False
    maps = [affine_map_from_ir(ir.AffineMapAttr(m).value) for m in raw_maps]
    return len(maps) == len(op.operands) and matches_maps(maps[0], maps[-1])


def pad_after_expand(value: ir.Value) -> bool:
    """Where `value` is a `tensor.expand_shape` of a zero pad that pads no dimension the reshape splits (a grouped
    convolution's pad -> channels split into groups), expand first and pad after, so that the pad feeds the window
    op directly and can join its dispatch; whether it did."""
    expand = producer(value)
    if expand is None or expand.name != "tensor.expand_shape" or not _used_once(value):
        return False
    pad = producer(expand.operands[0])
    if (pad is None or pad.name != "tensor.pad" or len(pad.operands) != 1 or not _used_once(pad.results[0])
            or not pads_with_zero(pad) or static_tensor(value.type) is None):
        return False
    groups = [[ir.IntegerAttr(d).value for d in group] for group in ir.ArrayAttr(expand.attributes["reassociation"])]
    low, high = (list(ir.DenseI64ArrayAttr(pad.attributes[k])) for k in ("static_low", "static_high"))
    if any(len(group) > 1 and (low[i] or high[i]) for i, group in enumerate(groups)):
        return False
    shape = list(ir.RankedTensorType(value.type).shape)
    new_low, new_high = [0] * len(shape), [0] * len(shape)
    for i, group in enumerate(groups):
        if len(group) == 1:
            new_low[group[0]], new_high[group[0]] = low[i], high[i]
            shape[group[0]] -= low[i] + high[i]
    element = ir.RankedTensorType(value.type).element_type
    with ir.InsertionPoint(expand), expand.location:
        reshaped = tensor.ExpandShapeOp(ir.RankedTensorType.get(shape, element), pad.operands[0],
                                        expand.attributes["reassociation"], [], shape).result
        padded = pad_with_zeros(reshaped, new_low, new_high, {})
    value.replace_all_uses_with(padded)
    expand.erase()
    erase_unused(pad)
    return True


def reduces_over_window_only(input_map: AffineMap, output_map: AffineMap) -> bool:
    """Every loop the output does not index appears in the input only beside an output loop (`oh + kh`)."""
    out_dims = output_map.dims()
    reductions = set(range(output_map.num_dims)) - out_dims
    if not reductions or not output_map.is_projected_permutation():
        return False
    for expr in input_map.results:
        if set(expr.dims()) & reductions and (not expr.linear or not set(expr.dims()) & out_dims):
            return False
    return all(any(d in expr.dims() for expr in input_map.results) for d in reductions)


def reads_a_1d_window(input_map: AffineMap, output_map: AffineMap) -> bool:
    """Exactly one index of the input adds a reduction loop to an output loop (`ow + kw`): a window over one
    dimension of the input, whatever else it reduces over."""
    out_dims = output_map.dims()
    reductions = set(range(output_map.num_dims)) - out_dims
    if not reductions or not output_map.is_projected_permutation():
        return False
    windows = [expr for expr in input_map.results
               if expr.linear and set(expr.dims()) & reductions and set(expr.dims()) & out_dims]
    return len(windows) == 1


def _initializer(value: ir.Value) -> list[ir.Operation]:
    """The `tensor.empty` and `linalg.fill` making `value`, when nothing else uses them (they join the region)."""
    fill = producer(value)
    if fill is None or fill.name != "linalg.fill" or not _used_once(value):
        return []
    empty = producer(fill.operands[1])
    if empty is not None and empty.name == "tensor.empty" and _used_once(fill.operands[1]):
        return [empty, fill]
    return [fill]


def _used_once(value: ir.Value) -> bool:
    return len(list(value.uses)) == 1


def _in_region(op: ir.Operation) -> bool:
    return any(parent.name == REGION for parent in ancestors(op))

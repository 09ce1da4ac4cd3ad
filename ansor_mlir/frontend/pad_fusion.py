"""Pad fusion: a window op that reduces over its window only gets its input's padding in its own dispatch.

IREE gives every `tensor.pad` a dispatch of its own: the padded input is
written to memory and read back by the convolution. For a convolution that
reduces over input channels this costs little beside its FLOPs, and IREE's
schedules of the fused form are slower (measured at IREE's defaults on this
suite: 0.5-0.9x). A window op that reduces over its window only (depthwise
convolutions, pooling) does a few FLOPs per input element, so the extra pass
over memory is a third of its time: fused, IREE's own configuration of a
3x3 depthwise convolution runs 1.25-1.3x faster, before any tuning.

The match reads loop structure, never op names: a linalg op whose reduction
loops each appear in its input map only added to an output loop (`oh + kh`,
never alone, as an input-channel loop would), whose input is a `tensor.pad`
used by it alone. The pad, the op's initializer (a `linalg.fill` of a
`tensor.empty`, when used by it alone) and the op go into one
`flow.dispatch.region`, which IREE keeps as one dispatch.

`conv-pad-fusion` takes every window op (some input index adds a reduction
loop to an output loop), input-channel reductions included: on IREE's task
system the separate pad is a fill and a copy of the whole input, each a
step the workers finish and wait on before the convolution starts. With 2
workers on the 2-vCPU Zen 4 guest the tuned C1D's dispatch ran 40.9 us
alone and its program 58.4 us (on one thread 57 and 60 us); fused, the
tuned program ran 47 us. The tuned strategies pad each workgroup's input
tile (`codegen.transform_strategy._fuse_pads`); IREE's default of the fused
form is slow (C1D 1.5 ms against 0.2 ms), so the rewrite is opt-in and
`tuning.rewrite_check` keeps it only where the tuned program wins.
"""

from __future__ import annotations

from collections.abc import Callable

from iree.compiler import ir
from iree.compiler.dialects import linalg

from ansor_mlir.core.affine import AffineMap
from ansor_mlir.frontend.affine_maps import affine_map_from_ir
from ansor_mlir.frontend.dispatch_regions import REGION, wrap_in_dispatch_region
from ansor_mlir.mlir.context import ancestors, producer, walk

NAME = "pad-fusion"
CONV_NAME = "conv-pad-fusion"
# The rewrites whose flow-level output builds only with `mlir.iree_compiler.FLOW_PAD_FLAG`.
NAMES = (NAME, CONV_NAME)


def fuse_pads_into_window_ops(module: ir.Module) -> int:
    """Put every op reducing over a window only and its input's pad into one dispatch region; how many were."""
    return _fuse(module, reduces_over_window_only)


def fuse_pads_into_convolutions(module: ir.Module) -> int:
    """Put every window op (convolutions over input channels too) and its input's pad into one dispatch region;
    how many were."""
    return _fuse(module, reads_a_window)


def _fuse(module: ir.Module, matches_maps: Callable[[AffineMap, AffineMap], bool]) -> int:
    matches = [found for found in (match_padded_window_op(op, matches_maps) for op in list(walk(module.operation)))
               if found]
    for ops in matches:
        wrap_in_dispatch_region(ops, [ops[-1].results[0]])
    return len(matches)


def match_padded_window_op(op: ir.Operation, matches_maps: Callable[[AffineMap, AffineMap], bool] | None = None,
                           ) -> list[ir.Operation] | None:
    """The ops to fuse (pad, initializer ops, `op`) when `op` reads a padded input and its (input, output) maps
    pass `matches_maps` (default: it reduces over a window only)."""
    raw_maps = linalg.get_indexing_maps(op) if op.name.startswith("linalg.") else None
    if raw_maps is None or len(op.results) != 1 or len(op.operands) < 2 or _in_region(op):
        return None
    maps = [affine_map_from_ir(ir.AffineMapAttr(m).value) for m in raw_maps]
    if len(maps) != len(op.operands) or not (matches_maps or reduces_over_window_only)(maps[0], maps[-1]):
        return None
    pad = producer(op.operands[0])
    if pad is None or pad.name != "tensor.pad" or not _used_once(pad.results[0]):
        return None
    if any(not isinstance(v.type, ir.RankedTensorType) or not ir.RankedTensorType(v.type).has_static_shape
           for v in (*op.operands, op.results[0])):
        return None
    return [pad, *_initializer(op.operands[-1]), op]


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


def reads_a_window(input_map: AffineMap, output_map: AffineMap) -> bool:
    """Some index of the input adds a reduction loop to an output loop (`oh + kh`): a window over the input."""
    out_dims = output_map.dims()
    reductions = set(range(output_map.num_dims)) - out_dims
    if not reductions or not output_map.is_projected_permutation():
        return False
    return any(expr.linear and set(expr.dims()) & reductions and set(expr.dims()) & out_dims
               for expr in input_map.results)


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

"""Channels-last rewrite: NCHW convolutions become NHWC ones before IREE forms its dispatches.

ONNX and PyTorch models arrive channels-first (`linalg.conv_2d_nchw_fchw`,
`linalg.depthwise_conv_2d_nchw_chw`). There a convolution's contiguous
dimension is the image width, the reduction over channels strides across
whole planes, and no register tile of a task can make the channel loop both
vectorized and contiguous, so even IREE's default build of a CNN runs
slower channels-first than channels-last, before any tuning
(measured: docs/reports/program_rewrites.md).
Channels-last, a 1x1 convolution is a matmul, a KxK one a GEMM over
contiguous channel panels, and a depthwise one a channel-vector loop: the
shapes the micro-kernel and depthwise sketches tile.

The rewrite wraps each convolution in transposes (input and filter in,
result out); IREE's global optimization then propagates them through the
elementwise ops between convolutions and cancels the pairs, and hoists the
filter transposes of constant weights out of the program's calls. Regular
convolutions go through IREE's own preprocessing passes (conv to channels
last, then 1x1 filters to matmuls); depthwise convolutions and poolings,
which those passes leave as they are, are rewritten here.
"""

from __future__ import annotations

from collections.abc import Callable

from iree.compiler import ir, passmanager
from iree.compiler.dialects import linalg, tensor

from ansor_mlir.mlir.context import dense_ints, walk

NAME = "channels-last"

# IREE's preprocessing passes, run on each function: NCHW/FCHW convolutions to NHWC/HWCF, then 1x1 ones to matmuls.
IREE_PASSES = "iree-preprocessing-convert-conv-to-channels-last,iree-preprocessing-convert-1x1-filter-conv2d-to-matmul"
FUNCTION_OPS = ("func.func", "util.func")
CHANNELS_FIRST_CONVOLUTIONS = ("linalg.conv_1d_ncw_fcw", "linalg.conv_2d_nchw_fchw", "linalg.conv_2d_ngchw_fgchw",
                               "linalg.conv_2d_ngchw_gfchw", "linalg.conv_3d_ncdhw_fcdhw")
# NCHW -> NHWC, CHW -> HWC, and NHWC -> NCHW.
TO_NHWC = (0, 2, 3, 1)
TO_HWC = (1, 2, 0)
TO_NCHW = (0, 3, 1, 2)
# Per-channel window ops IREE's passes leave channels-first: name -> (channels-last builder, filter permutation;
# None: the filter is the window's shape only, the same in both layouts).
PER_CHANNEL_OPS: dict[str, tuple[Callable[..., ir.Value], tuple[int, ...] | None]] = {
    "linalg.depthwise_conv_2d_nchw_chw": (linalg.depthwise_conv_2d_nhwc_hwc, TO_HWC),
    "linalg.pooling_nchw_max": (linalg.pooling_nhwc_max, None),
    "linalg.pooling_nchw_sum": (linalg.pooling_nhwc_sum, None),
}


def convert_to_channels_last(module: ir.Module) -> int:
    """Rewrite `module`'s channels-first convolutions in place; returns how many it rewrote."""
    for op in [op for op in walk(module.operation) if _is_strided_pointwise(op)]:
        _slice_strided_pointwise(op)
    per_channel = [op for op in walk(module.operation) if op.name in PER_CHANNEL_OPS and _static(op)]
    for op in per_channel:
        _per_channel_to_nhwc(op)
    regular = _count(module, CHANNELS_FIRST_CONVOLUTIONS)
    if regular:
        functions = {op.name for op in walk(module.operation) if op.name in FUNCTION_OPS}
        nested = ",".join(f"{kind}({IREE_PASSES})" for kind in FUNCTION_OPS if kind in functions)
        with module.context:
            passmanager.PassManager.parse(f"builtin.module({nested})").run(module.operation)
    return len(per_channel) + regular - _count(module, CHANNELS_FIRST_CONVOLUTIONS)


def _is_strided_pointwise(op: ir.Operation) -> bool:
    """A strided 1x1 NCHW convolution (ResNet's downsampling shortcut)."""
    if op.name != "linalg.conv_2d_nchw_fchw" or not _static(op) or "strides" not in op.attributes:
        return False
    w = ir.RankedTensorType(op.operands[1].type)
    dilations_ok = "dilations" not in op.attributes or set(dense_ints(op.attributes["dilations"])) == {1}
    return tuple(w.shape[2:]) == (1, 1) and set(dense_ints(op.attributes["strides"])) != {1} and dilations_ok


def _slice_strided_pointwise(op: ir.Operation) -> None:
    """Stride the input, not the convolution: a stride-1 1x1 convolution over `x[:, :, ::sh, ::sw]`.

    IREE's 1x1-to-matmul pass takes only stride-1 convolutions; left strided,
    IREE's transpose propagation folds the output transpose into the strided
    contraction and leaves it channels-first, with no vectorized channel
    loop (measured: docs/reports/program_rewrites.md)."""
    x, w, init = op.operands[0], op.operands[1], op.operands[2]
    out = ir.RankedTensorType(init.type)
    strides = dense_ints(op.attributes["strides"])
    x_type = ir.RankedTensorType(x.type)
    sizes = [x_type.shape[0], x_type.shape[1], *out.shape[2:]]
    with ir.InsertionPoint(op), op.location:
        sliced = tensor.extract_slice(ir.RankedTensorType.get(sizes, x_type.element_type), x, [], [], [],
                                      [0, 0, 0, 0], sizes, [1, 1, *strides])
        result = linalg.conv_2d_nchw_fchw(sliced, w, outs=[init], strides=[1, 1], dilations=[1, 1])
    op.results[0].replace_all_uses_with(result)
    op.erase()


def _per_channel_to_nhwc(op: ir.Operation) -> None:
    """`op_nchw(x, w, init)` -> the transpose back of `op_nhwc(x', w', init')`, same window attributes."""
    build, filter_permutation = PER_CHANNEL_OPS[op.name]
    x, w, init = op.operands[0], op.operands[1], op.operands[2]
    window = {name: op.attributes[name] for name in ("strides", "dilations") if name in op.attributes}
    with ir.InsertionPoint(op), op.location:
        w = w if filter_permutation is None else _transpose(w, filter_permutation)
        result = build(_transpose(x, TO_NHWC), w, outs=[_transpose(init, TO_NHWC)], **window)
        back = _transpose(result, TO_NCHW)
    op.results[0].replace_all_uses_with(back)
    op.erase()


def _transpose(value: ir.Value, permutation: tuple[int, ...]) -> ir.Value:
    source = ir.RankedTensorType(value.type)
    shape = [source.shape[p] for p in permutation]
    op = linalg.transpose(value, outs=[tensor.empty(shape, source.element_type)], permutation=list(permutation))
    return op.results[0]  # the builder returns the op (its results are variadic), not its result


def _static(op: ir.Operation) -> bool:
    """Only ops on static tensors are rewritten: their transposes' shapes are known here."""
    types = [v.type for v in (*op.operands, *op.results)]
    return all(isinstance(t, ir.RankedTensorType) and t.has_static_shape for t in types)


def _count(module: ir.Module, names: tuple[str, ...]) -> int:
    return sum(op.name in names for op in walk(module.operation))

"""What an op computes, read alike off an IREE dispatch's root and off an onnxruntime node, so the two match.

An `OpShape` is an op's kind (for people: `conv 3x3 /2`, `depthwise 3x3`,
`1x1 conv / matmul`), its category, its output elements and the reduction
elements behind each output. A dispatch's comes from its root's loop
structure (window loops are reductions read through a compound index, the
stride a parallel loop's coefficient in one); a node's from its op type and
the shapes onnxruntime's profiler records (a pool's kernel from the graph).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ansor_mlir.core.affine import AffineExpr
from ansor_mlir.core.task import RootOp

CONTRACTION, REDUCTION, ELEMENTWISE, LAYOUT, OTHER = "contraction", "reduction", "elementwise", "layout", "other"
MATMUL_KIND = "1x1 conv / matmul"
LAYOUT_KIND = "layout (copy, transpose, pad)"
# onnxruntime op types, by what they compute (the CPU provider's fused and NCHWc forms included).
ORT_CONVS = {"Conv", "FusedConv", "NhwcConv", "NhwcFusedConv"}
ORT_MATMULS = {"MatMul", "FusedMatMul", "Gemm", "FusedGemm"}
ORT_POOLS = {"MaxPool", "AveragePool", "NhwcMaxPool"}
ORT_GLOBAL_POOLS = {"GlobalAveragePool", "GlobalMaxPool"}
ORT_REDUCES = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"}
ORT_LAYOUT = {"ReorderInput", "ReorderOutput", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity",
              "Concat", "Slice", "Pad", "Split", "Expand", "Gather"}
ORT_ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Relu", "Clip", "Sigmoid", "Tanh", "Erf", "Gelu", "FastGelu", "Sqrt",
                   "Pow", "HardSigmoid", "HardSwish", "LeakyRelu", "BatchNormalization", "Neg", "Exp", "Where", "Cast"}


@dataclass(frozen=True)
class OpShape:
    """What one op computes, read alike off a dispatch's root and off an onnxruntime node: its kind (for people),
    its category, its output elements and the reduction elements behind each output."""

    kind: str
    category: str
    outputs: int
    reduction: int = 1

    @property
    def key(self) -> tuple[str, int, int]:
        return self.category, self.outputs, self.reduction

    @property
    def mac_flops(self) -> int:
        """2 FLOPs per multiply-accumulate of a contraction, 0 for the rest."""
        return 2 * self.outputs * self.reduction if self.category == CONTRACTION else 0


def _compound(expr: AffineExpr) -> bool:
    """A window or strided access (`oh + kh`, `2 * ow`): more than one loop, or a coefficient other than 1."""
    return not expr.linear or len(expr.terms) > 1 or any(c != 1 for _, c in expr.terms)


def _stride_suffix(stride: int) -> str:
    return f" /{stride}" if stride > 1 else ""


def root_shape(root: RootOp) -> OpShape:
    """The shape of a dispatch's root: window loops (reductions read through a compound index) give the kernel,
    a parallel loop's coefficient in a compound index the stride."""
    parallel = [d for d, it in enumerate(root.iterator_types) if it == "parallel"]
    reduced = [d for d, it in enumerate(root.iterator_types) if it != "parallel"]
    outputs = math.prod(root.loop_extents[d] for d in parallel)
    reduction = math.prod(root.loop_extents[d] for d in reduced)
    compound = [e for m in root.indexing_maps for e in m.results if _compound(e)]
    windows = [d for d in reduced if any(d in e.dims() for e in compound)]
    stride = max((c for e in compound for d, c in e.terms if d in parallel), default=1)
    window = "x".join(str(root.loop_extents[d]) for d in windows)
    if not reduced:
        computes = any(op.startswith(("arith.", "math.")) for op in root.body_ops)
        return OpShape("elementwise" if computes else LAYOUT_KIND, ELEMENTWISE if computes else LAYOUT, outputs)
    if "arith.mulf" not in root.body_ops and "arith.muli" not in root.body_ops:
        kind = f"pool {window}{_stride_suffix(stride)}" if windows else "reduce"
        return OpShape(kind, REDUCTION, outputs, reduction)
    if windows:
        depthwise = len(windows) == len(reduced)
        kind = f"{'depthwise' if depthwise else 'conv'} {window}{_stride_suffix(stride)}"
    else:
        kind = f"conv 1x1{_stride_suffix(stride)}" if stride > 1 else MATMUL_KIND
    return OpShape(kind, CONTRACTION, outputs, reduction)


def name_shape(function: str) -> OpShape:
    """A dispatch without a task (IREE's own copies, ops with no loop nest of their own): its kind from the name
    IREE gave it; it matches no onnxruntime node."""
    if any(word in function for word in ("memcpy", "transpose", "copy", "pad")):
        return OpShape(LAYOUT_KIND, LAYOUT, 0)
    return OpShape(function.split("_dispatch_", 1)[-1].split("_", 1)[-1] or "unknown", OTHER, 0)


def node_shape(op: str, inputs: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]],
               kernel: Sequence[int] = ()) -> OpShape:
    """The shape of an onnxruntime node from its op type, its profiled shapes and (pools) its kernel."""
    out = outputs[0] if outputs else []
    elements = math.prod(out) if out else 0
    spatial_in = inputs[0][2:] if inputs and len(inputs[0]) > 2 else []
    spatial_out = out[2:] if len(out) > 2 else []
    stride = spatial_in[-1] // spatial_out[-1] if spatial_in and spatial_out and spatial_out[-1] else 1
    if op in ORT_CONVS and len(inputs) > 1:
        weight = inputs[1]
        window = "x".join(str(k) for k in weight[2:])
        depthwise = weight[1] == 1 and len(inputs[0]) > 1 and inputs[0][1] > 1
        if depthwise:
            kind = f"depthwise {window}{_stride_suffix(stride)}"
        elif all(k == 1 for k in weight[2:]):
            kind = f"conv 1x1{_stride_suffix(stride)}" if stride > 1 else MATMUL_KIND
        else:
            kind = f"conv {window}{_stride_suffix(stride)}"
        return OpShape(kind, CONTRACTION, elements, math.prod(weight[1:]))
    if op in ORT_MATMULS and inputs:
        reduction = inputs[0][-1] if op in ("MatMul", "FusedMatMul") else math.prod(inputs[0]) // max(1, out[0])
        return OpShape(MATMUL_KIND, CONTRACTION, elements, reduction)
    if op in ORT_POOLS:
        window = "x".join(str(k) for k in kernel) or "?"
        return OpShape(f"pool {window}{_stride_suffix(stride)}", REDUCTION, elements, math.prod(kernel) or 1)
    if op in ORT_GLOBAL_POOLS or op in ORT_REDUCES:
        reduction = math.prod(inputs[0]) // max(1, elements) if inputs else 1
        return OpShape("reduce", REDUCTION, elements, reduction)
    if op in ORT_LAYOUT:
        return OpShape(LAYOUT_KIND, LAYOUT, elements)
    if op in ORT_ELEMENTWISE:
        return OpShape("elementwise", ELEMENTWISE, elements)
    return OpShape(op.lower(), OTHER, elements)

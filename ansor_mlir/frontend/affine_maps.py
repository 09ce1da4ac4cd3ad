"""Convert the bindings' affine maps into the core's typed `AffineMap` data, and a linalg op's loop nest.

Reads the expression tree through the bindings' classes (`ir.AffineDimExpr`,
`ir.AffineAddExpr`, ...), never the printed map, so a map means the same to
extraction, the search space and the features.
"""

from __future__ import annotations

from collections.abc import Sequence

from iree.compiler import ir
from iree.compiler.dialects import linalg

from ansor_mlir.core.affine import AffineExpr, AffineMap
from ansor_mlir.mlir.context import ops_of


def affine_expr_from_ir(expr: ir.AffineExpr) -> AffineExpr:
    """A linear sum of `coefficient * dim` terms and a constant where the expression is one, else non-linear."""
    if isinstance(expr, ir.AffineDimExpr):
        return AffineExpr.dim(expr.position)
    if isinstance(expr, ir.AffineConstantExpr):
        return AffineExpr.const(expr.value)
    if isinstance(expr, ir.AffineAddExpr):
        return affine_expr_from_ir(expr.lhs) + affine_expr_from_ir(expr.rhs)
    if isinstance(expr, ir.AffineMulExpr):
        lhs, rhs = affine_expr_from_ir(expr.lhs), affine_expr_from_ir(expr.rhs)
        if rhs.is_constant():
            return lhs.scaled(rhs.constant)
        if lhs.is_constant():
            return rhs.scaled(lhs.constant)
    return AffineExpr.nonlinear(_dims_read(expr))


def _dims_read(expr: ir.AffineExpr) -> list[int]:
    if isinstance(expr, ir.AffineDimExpr):
        return [expr.position]
    if isinstance(expr, ir.AffineBinaryExpr):
        return _dims_read(expr.lhs) + _dims_read(expr.rhs)
    return []


def affine_map_from_ir(amap: ir.AffineMap) -> AffineMap:
    return AffineMap(amap.n_dims, tuple(affine_expr_from_ir(e) for e in amap.results), amap.n_symbols)


def indexing_maps(op: ir.Operation) -> tuple[AffineMap, ...]:
    """The typed indexing maps of a linalg op that carries them (generic form, or named ops that store them)."""
    return tuple(affine_map_from_ir(ir.AffineMapAttr(a).value) for a in ir.ArrayAttr(op.attributes["indexing_maps"]))


def parse_affine_map(text: str, ctx: ir.Context | None = None) -> AffineMap:
    """The typed form of an `affine_map<...>` attribute written in MLIR (tests, hand-written tasks)."""
    return affine_map_from_ir(ir.AffineMapAttr(ir.Attribute.parse(text, ctx or ir.Context())).value)


def convolution_window(expr: AffineExpr, out_dims: Sequence[int], filter_dims: Sequence[int],
                       ) -> tuple[int, int, int, int] | None:
    """(output position, filter position, stride, dilation) when a convolution's input map reads `s*oh + d*kh`
    in this dimension: an output loop plus a loop only the filter reads."""
    if not expr.linear or expr.constant != 0 or len(expr.terms) != 2:
        return None
    for (o, s), (k, d) in (expr.terms, expr.terms[::-1]):
        if s > 0 and d > 0 and o in out_dims and k in filter_dims and k not in out_dims:
            return out_dims.index(o), filter_dims.index(k), s, d
    return None


def iterator_names(ctx: ir.Context) -> dict[ir.Attribute, str]:
    """`#linalg.iterator_type<...>` attributes by name, made by the bindings' own attribute builder."""
    build = ir.AttrBuilder.get("linalg.IteratorTypeEnum")
    return {build(kind, ctx): str(kind) for kind in linalg.IteratorType}


def loop_structure(op: ir.Operation) -> dict:
    """A linalg op's loop nest read off its indexing maps: each loop's extent (0 where no ranked operand
    indexes it alone), iterator kinds by name, typed maps, and its body's op names."""
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    names = iterator_names(op.context)
    iterators = [names[a] for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    extents = [0] * len(iterators)
    for amap, operand in zip(maps, op.operands, strict=True):
        if not isinstance(operand.type, ir.RankedTensorType):
            continue
        shape = operand.type.shape
        for pos, expr in enumerate(amap.results):
            if isinstance(expr, ir.AffineDimExpr):
                extents[expr.position] = max(extents[expr.position], shape[pos])
    body = [o.name for o in ops_of(op.regions[0].blocks[0]) if o.name != "linalg.yield"]
    return {
        "extents": tuple(extents),
        "iterators": tuple(iterators),
        "maps": indexing_maps(op),
        "body": tuple(body),
    }

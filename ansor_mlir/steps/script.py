"""Transform-dialect building blocks the step kinds' emitters share: typed handles and the few op sequences every
strategy uses (tiling, fusion, padding, pattern sets, peeling).

Everything is built with the bindings' builders at the current insertion point; IREE's own `transform.iree.*`
ops go through the one generic fallback (`mlir.generic_op`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from iree.compiler import ir
from iree.compiler.dialects import transform
from iree.compiler.dialects.transform import loop, structured

from ansor_mlir.core.task import LinalgOpInfo
from ansor_mlir.mlir import generic_op

Pattern = Callable[[], object]
# The cleanup after tiling, run on the function after each phase that tiles.
TILING_CLEANUP: tuple[Pattern, ...] = (structured.ApplyTilingCanonicalizationPatternsOp,
                                       loop.ApplyForLoopCanonicalizationPatternsOp,
                                       transform.ApplyCanonicalizationPatternsOp)


def any_op() -> ir.Type:
    return transform.AnyOpType.get()


def op_type(name: str) -> ir.Type:
    return transform.OperationType.get(name)


def named(name: str) -> ir.Location:
    """Where a handle is defined; printing uses the name for it (`%func`) instead of a number."""
    return ir.Location.name(name)


def match_func(module: ir.Value, name: str = "func") -> ir.Value:
    """The payload's functions, as a handle named `name`."""
    with named(name):
        return structured.MatchOp.match_op_names(module, ["func.func"]).result


def loop_position(sizes: Sequence[int], dim: int) -> int:
    """Index, among the loops `tile_using_for` makes for `sizes` (one per non-zero size), of loop `dim`'s."""
    return sum(1 for size in sizes[:dim] if size)


class Script:
    """Builds the strategy's transform ops at the current insertion point."""

    def tile_for(self, handle: ir.Value, sizes: Sequence[int], interchange: Sequence[int] = ()
                 ) -> tuple[ir.Value, list[ir.Value]]:
        tiled, *loops = structured.TileUsingForOp(handle, sizes=list(sizes),
                                                  interchange=list(interchange) or None).results
        tiled.set_type(any_op())  # handed on as any op, whatever the handle it tiled
        return tiled, loops

    def tile_fuse(self, handle: ir.Value, sizes: Sequence[int], interchange: Sequence[int] = ()
                  ) -> tuple[ir.Value, list[ir.Value]]:
        """`tile_for`, with the producers of the tile's operands (the accumulator's fill) fused into its loops."""
        tiled, *loops = structured.FuseOp(handle, tile_sizes=list(sizes),
                                          tile_interchange=list(interchange) or None).results
        tiled.set_type(any_op())
        return tiled, loops

    def fuse_into(self, producer: ir.Value, container: ir.Value) -> tuple[ir.Value, ir.Value]:
        fused, new = structured.FuseIntoContainingOp(producer, container).results
        return fused, new

    def pad(self, handle: ir.Value, op: LinalgOpInfo, element_type: str, dims: list[int]) -> ir.Value:
        """Pad loops `dims` of `op`'s (partial) tile to their static bounds; the result is sliced back."""
        elem = ir.Type.parse(element_type)
        zero = ir.FloatAttr.get(elem, 0.0) if element_type.startswith(("f", "bf")) else ir.IntegerAttr.get(elem, 0)
        padded = structured.PadOp(handle, padding_values=[zero] * len(op.indexing_maps), padding_dimensions=dims,
                                  copy_back_op="none")
        return padded.results[0]

    def patterns(self, target: ir.Value, patterns: Sequence[Pattern]) -> None:
        apply = transform.ApplyPatternsOp(target)
        with ir.InsertionPoint(apply.patterns):
            for pattern in patterns:
                pattern()

    def peel(self, loop_handle: ir.Value) -> tuple[ir.Value, ir.Value]:
        """The loop's whole iterations and its last, partial one as two loops (`transform.loop.peel`)."""
        with named("row_loop"):
            cast = transform.CastOp(op_type("scf.for"), loop_handle).result
        with named("peeled"):
            main, rest = loop.LoopPeelOp(any_op(), any_op(), cast).results
        return main, rest

    def ops_in(self, container: ir.Value, count: int) -> list[ir.Value]:
        """The `count` linalg ops inside a loop, in textual order."""
        with named("peeled_ops"):
            found = structured.MatchOp(any_op(), container, interface=structured.MatchInterfaceEnum.LinalgOp).result
        return list(transform.SplitHandleOp([any_op()] * count, found).results) if count > 1 else [found]

    def merge(self, handles: Sequence[ir.Value]) -> ir.Value:
        return transform.MergeHandlesOp(list(handles)).result

    def iree(self, name: str, target: ir.Value, results: int = 0) -> list[ir.Value]:
        """One of IREE's `transform.iree.*` ops (no Python builder): one handle in, `results` handles out."""
        return list(generic_op.op(name, [target], [any_op()] * results).results)

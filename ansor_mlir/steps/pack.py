"""`Pack`: the root packed by its register vector tile above the register levels (`[j/nr, k, nr]` panels).

Every operand indexed by the vector loop gets a `[..., nr]` inner tile
(`transform.structured.pack`) just before the register levels, so each
register step reads whole vectors. A packed root's row tiles (loops no packed
operand reads) are cut after the packing, as GotoBLAS orders its loops
(`jc, pc, pack B, ic, jr, ir`): each `[kc, nc]` panel is packed once per
workgroup and read by every row tile of it. Cut before it, the panel was
packed again for each row tile (TBS's 8x8 transposes were as many
instructions as its micro-kernel).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import gcd

from iree.compiler import ir
from iree.compiler.dialects import transform
from iree.compiler.dialects.transform import structured

from ansor_mlir.core.schedule import Pack, is_register_level
from ansor_mlir.space.dag import Dag, operands_along, vector_loop
from ansor_mlir.space.resolved import Resolved
from ansor_mlir.steps.checks import CheckContext, InteriorUnitDims
from ansor_mlir.steps.script import Script, any_op, match_func, named, op_type
from ansor_mlir.steps.step_kind import Emission, LevelTiling, Settings, StepKind


def deferred_row_tiles(resolved: Resolved) -> tuple[int, ...]:
    """The root's cache tiles of its row loops (those no packed operand reads), 0 elsewhere; empty when the root
    is not cached."""
    if "cache_parallel" not in resolved.per_level:
        return ()
    assert resolved.dag is not None
    rows = resolved.dag.unpacked_rows()
    return tuple(size if d in rows else 0 for d, size in enumerate(resolved.per_level["cache_parallel"]))


def packed_sizes(sizes: tuple[int, ...], dag: Dag) -> tuple[int, ...]:
    """A register level's tile sizes in the packed root's loops: the vector loop counts whole `nr` blocks."""
    vector_dim = vector_loop(dag.ops[dag.root])
    out = [*sizes, 0]
    out[vector_dim] = 1 if sizes[vector_dim] else 0
    return tuple(out)


def pack_root(s: Script, handle: ir.Value, dag: Dag, tiles: Resolved, block: int = 0) -> ir.Value:
    """Pack the root's operands along the vector loop by the register tile `nr`, above the register levels.

    The output's inner tile is a reshape (the vector loop is already
    innermost), a transposed input's (`K[j, h, k]` -> `[j/nr, h, k, nr]`) is a
    real transpose, tiled into `block x block` vector transposes where `block`
    divides `nr` (`Pack.block`; else, or 0, `gcd(k, nr) x nr`). The packed
    root has one more loop (the inner `nr`).

    LLVM transposes a 4x4 f32 block with in-lane shuffles; a 32x32 block (TBS's `nr`) took index-vector
    permutes and spilled: 2288 instructions per block, 225 spill stores, and the packing cost 15% of the
    call (AVX-512 Intel guest, TBS(1,128,12,64): 173 -> 150 us with 4x4 blocks, 8x8 157, 16x16 171).
    """
    root = dag.ops[dag.root]
    vector_dim = vector_loop(root)
    nr = tiles.register[vector_dim]
    extents = tiles.above_register
    sizes = [nr if d == vector_dim else 0 for d in range(len(root.extents))]
    with named("packed"):
        packed = structured.PackOp(op_type("linalg.generic"), handle, [], static_packed_sizes=sizes).result
    for operand, dims in operands_along(root, vector_dim):
        with named("pack"):
            pack = transform.GetProducerOfOperand(op_type("linalg.pack"), packed, operand).result
        lowered = structured.LowerPackOp(op_type("tensor.pad"), op_type("tensor.expand_shape"),
                                         op_type("linalg.transpose"), pack).results
        if operand < root.num_inputs:
            # The transpose's loops are the packed operand's dims: tile all but its two innermost.
            inner = dims[-1][0]
            side = block if block and nr % block == 0 else nr
            transpose_tiles = [1] * len(dims) + [side if side < nr else 0]
            transpose_tiles[-2] = gcd(extents[inner], side)
            s.tile_for(lowered[2], transpose_tiles)
    with named("unpack"):
        unpack = transform.GetConsumersOfResult(op_type("linalg.unpack"), packed, 0).result
    structured.LowerUnPackOp(op_type("tensor.empty"), op_type("linalg.transpose"), op_type("tensor.collapse_shape"),
                             op_type("tensor.extract_slice"), op_type("linalg.copy"), unpack)
    with named("packed_any"):
        return transform.CastOp(any_op(), packed).result


@dataclass(frozen=True)
class PackedLoopAboveRegisters:
    """A packed root whose only parallel loop is its vector loop (a row reduction, `sum(x[i, :])` with rows in
    vectors) keeps a loop of that loop between its pack and its register tile: with the cache tile equal to the
    register tile the packed accumulator's unpack ends up inside the reduction loop and bufferization fails
    ("Yield operand #0 is not equivalent to the corresponding iter bbArg", IREE 3.13: 10 of 14 candidates of a
    BERT layer norm's 128x768 sum; GEMMs, with row loops besides, build either way)."""

    def __call__(self, ctx: CheckContext) -> bool:
        resolved = ctx.resolved
        root = resolved.root
        cache = resolved.per_level.get("cache_parallel")
        if cache is None or root.iterator_types.count("parallel") != 1:
            return True
        v = vector_loop(root)
        return cache[v] > resolved.register[v]


class PackKind(StepKind[Pack]):
    step = Pack
    checks = (PackedLoopAboveRegisters(),)
    # A packed strategy folds no unit dims, so interior unit tiles are fine there.
    waives = (InteriorUnitDims,)

    def refine(self, step: Pack, resolved: Resolved) -> Resolved:
        return replace(resolved, deferred_row_tiles=deferred_row_tiles(resolved))

    def stack_bytes(self, step: Pack, resolved: Resolved) -> int:
        return resolved.packed_panel_bytes

    def configure(self, step: Pack, resolved: Resolved, settings: Settings) -> Settings:
        # A packed root has no windows, and its output tile has an interior unit loop (`[1, 8, 1, 32]`), which
        # folding unit dims breaks; its panels inside cache loops bufferize to stack buffers in the loop.
        return replace(settings, fold_unit_dims=False, hoist_static_alloc=True)

    def level_tiling(self, step: Pack, e: Emission, level: str, tiling: LevelTiling) -> LevelTiling | None:
        if level == "cache_parallel":
            deferred = e.resolved.deferred_row_tiles
            return replace(tiling, sizes=tuple(0 if cut else size for size, cut in zip(tiling.sizes, deferred,
                                                                                       strict=True)))
        if is_register_level(level):
            return replace(tiling, sizes=packed_sizes(tiling.sizes, e.dag))
        return tiling

    def before_level(self, step: Pack, e: Emission, level: str) -> None:
        """Pack just above the register levels, then cut the deferred row tiles."""
        if level != "vector_common_parallel":
            return
        e.handles[e.dag.root] = pack_root(e.script, e.handles[e.dag.root], e.dag, e.resolved, step.block)
        if e.fill is not None:
            # The packed output's pad, reshape and identity transpose fold into the fill, which then feeds the
            # packed root directly.
            e.script.patterns(match_func(e.module), [transform.ApplyCanonicalizationPatternsOp])
        deferred = e.resolved.deferred_row_tiles
        if any(deferred):
            loops = e.tile_root(level, LevelTiling((*deferred, 0)))
            e.fuse_im2col(loops[-1])

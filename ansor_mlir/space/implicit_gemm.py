"""Implicit GEMM: a convolution's loops as the contraction IREE's `convolution-to-igemm` rewrite makes of it.

A convolution whose windows are strided, dilated or grouped fits the
register tiles of a GEMM poorly: a strided window (`2 * ow + kw`) is no
projected permutation, so the other sketches keep its loops unit, and a
grouped filter (`[g, f, kh, kw, c]`) is read across the vector loop. The
im2col view fixes both: the window loops and the input channels collapse
into one reduction loop `K` (`kh * kw * c`, in the filter's order), the input
becomes an `[..., pixels, K]` panel gathered per tile (IREE's
`iree_linalg_ext.im2col`, tiled with the root), and the root becomes a plain
contraction that the micro-kernel and packing sketches tile like a GEMM.

This module derives that contraction from loop structure alone (indexing
maps and iterator types), the way IREE 3.13's rewrite lays it out: the
root's parallel loops in their order, then `K`; the input reads the parallel
loops its windows and plain dims use, then `K`; the filter keeps its dims with
its run of reduction dims collapsed into `K`. Where the output's channels come
before its pixels (NCHW), the filter is the left operand and the panel
follows the output's dims with `K` in the channels' place (`[n, K, oh, ow]`).
A test checks the derivation against IREE's rewrite.
"""

from __future__ import annotations

from dataclasses import replace
from math import prod

from ansor_mlir.core.affine import AffineMap
from ansor_mlir.core.schedule import Step, TileAndFuse, TileKnob
from ansor_mlir.core.task import LinalgOpInfo
from ansor_mlir.space.dag import Dag

# IREE vectorizes an im2col tile's copies only at a K offset it can prove aligned to the input channels (a
# constant): the loop over a convolution's K tiles, with its im2col fused in, is unrolled up to this many
# iterations (a bound on code size; a longer loop keeps element copies, and the search picks bigger K tiles).
MAX_UNROLLED_K_TILES = 16


def window_input(op: LinalgOpInfo) -> int | None:
    """The input read through windows (some result mixes a parallel and a reduction loop, `2 * oh + kh`) when
    the op is a convolution an im2col turns into a contraction, else None.

    Such an op multiplies two inputs and accumulates (`mulf` + `addf`), its
    output and other input read plain loops only, the other input (the
    filter) reads every reduction loop as one contiguous run of its dims and a
    parallel loop the windowed input does not (output channels: a depthwise
    convolution has none and is no GEMM), and every window of the windowed
    input is linear in one parallel and one reduction loop.
    """
    if op.num_inputs != 2 or len(op.indexing_maps) != 3 or not {"arith.mulf", "arith.addf"} <= set(op.body_ops):
        return None
    kinds = op.iterator_types
    for windowed in (0, 1):
        filt, out = op.indexing_maps[1 - windowed], op.indexing_maps[2]
        source = op.indexing_maps[windowed]
        if not (filt.is_projected_permutation() and out.is_projected_permutation()):
            continue
        windows = [e for e in source.results if not e.is_dim()]
        if not windows or not all(_is_window(e.terms, kinds) for e in windows if e.linear):
            continue
        if any(not e.linear for e in windows):
            continue
        reductions = [i for i, d in enumerate(filt.result_dims()) if kinds[d] == "reduction"]
        every_reduction = {filt.result_dims()[i] for i in reductions} == {
            d for d, kind in enumerate(kinds) if kind == "reduction"}
        contiguous = reductions == list(range(reductions[0], reductions[-1] + 1)) if reductions else False
        has_n = bool(_output_channels(source, filt, out))
        if every_reduction and contiguous and has_n and all(kinds[d] == "parallel" for d in out.dims()):
            return windowed
    return None


def _is_window(terms: tuple[tuple[int, int], ...], kinds: tuple[str, ...]) -> bool:
    """`s * p + d * r`: one parallel loop and one reduction loop, positive coefficients."""
    loops = sorted(kinds[d] for d, _ in terms)
    return loops == ["parallel", "reduction"] and all(c > 0 for _, c in terms)


def implicit_gemm_root(op: LinalgOpInfo) -> LinalgOpInfo | None:
    """The contraction an im2col makes of convolution `op` (see the module docstring), None when `op` is not one."""
    windowed = window_input(op)
    if windowed is None:
        return None
    kinds = op.iterator_types
    parallel = [d for d, kind in enumerate(kinds) if kind == "parallel"]
    reductions = [d for d, kind in enumerate(kinds) if kind == "reduction"]
    new = {d: i for i, d in enumerate(parallel)}
    k = len(parallel)
    rank = k + 1
    source, filt, out = (op.indexing_maps[windowed], op.indexing_maps[1 - windowed], op.indexing_maps[2])
    channel_first = _channel_first(source, filt, out)
    if channel_first:  # the panel follows the output's dims, `K` where its output channels are
        channels = _output_channels(source, filt, out)
        source_dims = list(dict.fromkeys(k if d in channels else new[d] for d in out.result_dims()
                                         if d is not None and (d in channels or d in source.dims())))
    else:
        source_dims = [new[d] for d in parallel if d in source.dims()] + [k]
    filter_dims: list[int] = []
    for d in filt.result_dims():
        assert d is not None
        if kinds[d] == "parallel":
            filter_dims.append(new[d])
        elif k not in filter_dims:
            filter_dims.append(k)
    maps = [AffineMap.projection(rank, source_dims), AffineMap.projection(rank, filter_dims)]
    if channel_first or windowed == 1:
        maps.reverse()
    out_map = AffineMap.projection(rank, [new[d] for d in out.result_dims() if d is not None])
    extents = (*(op.extents[d] for d in parallel), prod(op.extents[d] for d in reductions))
    return replace(op, name="linalg.generic", extents=extents, iterator_types=(*["parallel"] * k, "reduction"),
                   indexing_maps=(*maps, out_map), producers=(-1, -1, op.producers[2]))


def _output_channels(source: AffineMap, filt: AffineMap, out: AffineMap) -> set[int]:
    """The loops of the filter and output that the windowed input does not read (output channels): the GEMM's
    `N`."""
    return (filt.dims() & out.dims()) - source.dims()


def _channel_first(source: AffineMap, filt: AffineMap, out: AffineMap) -> bool:
    """Whether the output's channels come before its pixels (NCHW): IREE then makes the filter the GEMM's left
    operand and lays the panel out as `[n, K, oh, ow]`, where NHWC gets the input's `[n, oh, ow, K]` first."""
    dims = [d for d in out.result_dims() if d is not None]
    channels = _output_channels(source, filt, out)
    pixels = {d for e in source.results if not e.is_dim() for d, _ in e.terms} & set(dims)
    if not channels or not pixels:
        return False
    return min(dims.index(d) for d in channels) < min(dims.index(d) for d in pixels)


def channels_first(op: LinalgOpInfo) -> bool:
    """Whether convolution `op`'s implicit GEMM is the channels-first one (filter first, `[n, K, oh, ow]`)."""
    windowed = window_input(op)
    if windowed is None:
        return False
    return _channel_first(op.indexing_maps[windowed], op.indexing_maps[1 - windowed], op.indexing_maps[2])


def channel_run(op: LinalgOpInfo) -> int:
    """The input channels one kernel tap reads contiguously (the windowed input's innermost dim, a reduction
    loop): 1 when that dim is a window or the op is no implicit GEMM."""
    windowed = window_input(op)
    if windowed is None:
        return 1
    inner = op.indexing_maps[windowed].results[-1]
    if not inner.is_dim() or op.iterator_types[inner.position] != "reduction":
        return 1
    return op.extents[inner.position]


def align_k_tiles(steps: tuple[Step, ...], k: int, channels: int) -> tuple[Step, ...]:
    """The steps with the outermost tile of loop `k` (the implicit GEMM's K) dividing `channels`: a K tile
    within one tap's channels is one contiguous run of the input, which IREE gathers with vector loads."""
    def aligned(step: Step) -> Step:
        if not isinstance(step, TileAndFuse):
            return step
        knobs = tuple(replace(knob, outer_divides=channels) if isinstance(knob, TileKnob) and knob.dim == k
                      and knob.of_root else knob for knob in step.knobs)
        return replace(step, knobs=knobs)
    return tuple(aligned(step) for step in steps)


def implicit_gemm_dag(dag: Dag) -> Dag | None:
    """The dispatch's DAG with its root rewritten into its implicit GEMM, None when the root is no convolution.

    The im2col op the rewrite inserts is no linalg op: the DAG's ops stay the
    same ones (fills, root, consumers), the root's windowed input now comes from
    outside it (`producers` -1), as the filter's collapsed view does.
    """
    root = implicit_gemm_root(dag.ops[dag.root])
    if root is None:
        return None
    ops = list(dag.ops)
    ops[dag.root] = root
    return Dag(tuple(ops), dag.root)


def unrolled_k_tiles(root: LinalgOpInfo, sizes: list[int]) -> int:
    """How many K tiles a level with tile `sizes` loops over when that loop (the innermost it makes: K, the
    implicit GEMM's last loop) is to be unrolled, else 0."""
    k = len(root.extents) - 1
    if root.iterator_types[k] != "reduction" or not sizes[k] or any(sizes[:k]):
        return 0
    trips = -(-root.extents[k] // sizes[k])
    return trips if 1 < trips <= MAX_UNROLLED_K_TILES else 0

"""Emit a transform sketch's candidate as the transform-dialect strategy IREE runs.

A sketch of this family *is* the codegen of its dispatch: a
`transform.named_sequence` that IREE runs instead of one of its pipelines
(`#iree_codegen.transform_dialect_codegen`). The strategy is derived from the
dispatch's DAG as IREE's codegen sees it (`Task.codegen_ops`), from the last
op to the first, as Ansor does:

- the last op is tiled to workgroups with `tile_using_forall` (and the
  workgroup-count region), every producer is fused into that tile;
- the root (the op with reductions) is tiled for cache and registers in
  `SSRSR` order; its consumers (epilogues) are fused into the root's tiles at
  the register level (`inner`) or computed after it per workgroup (`outer`);
- where the root's parallel tiles all come before its reduction tiles, its
  accumulator's fill is fused with them down to the register tile
  (`fused_fill`), so the accumulators start at zero in registers;
- reduction factorization (rfactor): `tile_reduction_using_for` keeps a
  vector of partial sums across the reduction loop;
- padding: register tiles that do not divide the loop (whole vectors over a
  109-wide output) are padded to full tiles (`transform.structured.pad`)
  and the pads vectorized into out-of-bounds reads and writes;
- micro-kernels: a register row tile that does not divide the tile above
  (6x16 over 64 rows) has its last, partial row tile peeled
  (`transform.loop.peel`), so both loops have static tiles; a direct
  convolution's rows (strided windows) are unrolled inside the reduction loops;
- implicit GEMM: a convolution is first rewritten by IREE into im2col +
  contraction (`iree-codegen-convolution-to-igemm`); the im2col is fused
  into the workgroup and cache tiles and decomposed into row copies;
- unit dimensions are folded so convolution windows vectorize as
  contractions, then everything is vectorized, accumulators hoisted out of
  the reduction loops (cache write), bufferized and the vectors lowered with
  a chosen contraction lowering.

The strategy is built with the bindings' transform builders (IREE's own
`transform.iree.*` ops through the generic fallback) and verified as it is
built, so a mistake here fails at once instead of as a candidate that does
not compile. `render_strategy` prints it deterministically: a candidate
always rebuilds the byte-identical script.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from math import gcd

from iree.compiler import ir
from iree.compiler.dialects import transform
from iree.compiler.dialects.transform import loop, structured, vector

from ansor_mlir.codegen.gpu_transform_strategy import emit_gpu_strategy
from ansor_mlir.codegen.iree_config import no_pipeline_translation_info
from ansor_mlir.core.schedule import (
    LEVEL_KIND,
    REDUCTION,
    SPATIAL,
    Candidate,
    Decompose,
    ImplicitGemm,
    MicroKernel,
    Pack,
    Pad,
    PadRows,
    Rfactor,
    Sketch,
    is_register_level,
)
from ansor_mlir.core.task import LinalgOpInfo, Task
from ansor_mlir.mlir import generic_op
from ansor_mlir.mlir.context import parse_module, print_op, shared_context, verify, walk
from ansor_mlir.space.annotation import divisors
from ansor_mlir.space.dag import (
    Dag,
    dim_map,
    has_window,
    operands_along,
    output_dims,
    read_through_window,
    vector_loop,
)
from ansor_mlir.space.decisions import CACHE_WRITE, FUSION, LOWERING, REDUCTION_LOWERING
from ansor_mlir.space.gpu_mapping import is_gpu_sketch
from ansor_mlir.space.micro_kernel import peeled_rows
from ansor_mlir.space.resolve import Resolved, resolve

BLOCKS = ("z", "y", "x")
# IREE's rewrite of a convolution into im2col + contraction, the im2col op, and its decomposition into copies.
IGEMM_PASS = "iree-codegen-convolution-to-igemm"
IM2COL = "iree_linalg_ext.im2col"
DECOMPOSE_IM2COL_PASS = "iree-linalg-ext-decompose-im2col"
FOLD_TENSOR_EMPTY = "transform.apply_patterns.tensor.fold_tensor_empty"
# Slices move above reshapes, so a padded input reshaped on its way to the root is sliced right after its pad;
# IREE's passes then swap the workgroup's slice of the pad into a pad of a slice, and vectorize that pad.
BUBBLE_UP_SLICES = "transform.apply_patterns.tensor.bubble_up_extract_slice"
FUSE_PADS_PASS = "iree-codegen-fuse-tensor-pad-with-consumer"
CONCRETIZE_PADS_PASS = "iree-codegen-concretize-pad-result-shape"
VECTORIZE_PADS_PASS = "iree-codegen-vectorize-tensor-pad"
# IREE folds a fused pad's unit batch dimension (`collapse_shape`, a 3-D pad, `expand_shape`) when it builds a
# flow-level module (the tuner's candidates, `OUT.mlir`), but not inside a dispatch region the program already
# holds (the pad-fusion rewrite's, which a tuning spec meets): there the pad stays 4-D, a row of it spanned
# a whole `WxC` plane, and the same strategy ran 0.66 ms against 0.17 ms (DEP(1,42,42,144), Zen 3). The
# strategy folds them first, so both flows see one IR (on a flow-level module the pass changes nothing).
FOLD_UNIT_DIMS_PASS = "iree-dispatch-creation-fold-unit-extent-dims-for-func"
# Linalg ops a strategy tiles as they are. A named op with windowed inputs (a named convolution or pooling)
# vectorizes only as a 1-D convolution: it becomes a generic first, which the vectorizer takes once its unit
# window loops fold away (a decomposed sketch specializes it back).
GENERIC_OPS = ("linalg.generic", "linalg.fill")
# Levels the root is not tiled at by its own loops: the workgroups (tiled from the last op) and the vector shape.
NOT_ROOT_LEVELS = ("distribution", "vector_inner_parallel")
# Knob options, as the transform dialect spells them, to the bindings' enums.
CONTRACTION_LOWERINGS = {e.name.lower(): e for e in vector.VectorContractLowering}
REDUCTION_LOWERINGS = {e.name.lower(): e for e in vector.VectorMultiReductionLowering}
Pattern = Callable[[], object]


def _any() -> ir.Type:
    return transform.AnyOpType.get()


def _op_type(name: str) -> ir.Type:
    return transform.OperationType.get(name)


def _named(name: str) -> ir.Location:
    """Where a handle is defined; printing uses the name for it (`%func`) instead of a number."""
    return ir.Location.name(name)


class _Script:
    """Builds the strategy's transform ops at the current insertion point."""

    def tile_for(self, handle: ir.Value, sizes: list[int]) -> tuple[ir.Value, list[ir.Value]]:
        tiled, *loops = structured.TileUsingForOp(handle, sizes=sizes).results
        tiled.set_type(_any())  # handed on as any op, whatever the handle it tiled
        return tiled, loops

    def tile_fuse(self, handle: ir.Value, sizes: list[int]) -> tuple[ir.Value, list[ir.Value]]:
        """`tile_for`, with the producers of the tile's operands (the accumulator's fill) fused into its loops."""
        tiled, *loops = structured.FuseOp(handle, tile_sizes=sizes).results
        tiled.set_type(_any())
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
        with _named("row_loop"):
            cast = transform.CastOp(_op_type("scf.for"), loop_handle).result
        with _named("peeled"):
            main, rest = loop.LoopPeelOp(_any(), _any(), cast).results
        return main, rest

    def ops_in(self, container: ir.Value, count: int) -> list[ir.Value]:
        """The `count` linalg ops inside a loop, in textual order."""
        with _named("peeled_ops"):
            found = structured.MatchOp(_any(), container, interface=structured.MatchInterfaceEnum.LinalgOp).result
        return list(transform.SplitHandleOp([_any()] * count, found).results) if count > 1 else [found]

    def merge(self, handles: Sequence[ir.Value]) -> ir.Value:
        return transform.MergeHandlesOp(list(handles)).result

    def iree(self, name: str, target: ir.Value, results: int = 0) -> list[ir.Value]:
        """One of IREE's `transform.iree.*` ops (no Python builder): one handle in, `results` handles out."""
        return list(generic_op.op(name, [target], [_any()] * results).results)


def _fuse_pads(s: _Script, func: ir.Value, rank: int, row: int) -> ir.Value:
    """The dispatch's own `tensor.pad` (`rank`: `padded_input_rank`) moved into the workgroup tile (IREE's passes, as
    its convolution pipeline does): each workgroup pads its input tile once, into a stack buffer its register
    tiles reuse across the window (annotation bounds it, `Resolved.padded_input_bytes`), instead of padding the
    whole input (megabytes). Moved further in, every window tap of every register tile would pad its own slice
    (guarded row reads): 1.3-4x slower on DEP.

    The tile's pad is then tiled into rows before it is vectorized: every dimension but the two innermost by 1,
    the second-innermost by `row` (`pad_row_tile`; 0: whole), so each row is one guarded read of up to half the
    vector registers, or zeros, stored once. Vectorized whole, the tile was a single `vector<6x10x32xf32>`
    value, spilled to the stack and copied again (`perf` on DEP: half the kernel's time); in rows of the
    innermost dimension, the same fused candidates ran 1.04-1.44x faster on DEP(1,112,112,32) and 1.4-4.5x on
    DEP(1,42,42,144), timed alternately on Zen 3. Those rows are one vector each, and every one paid a dozen
    scalar instructions of bounds: in rows of the two innermost dimensions DEP(1,112,112,32)'s candidates ran
    1.06-1.2x faster again (AVX-512 Xeon, `PadRows`).

    Slices move above the reshape between the pad and the root first (IREE drops the unit batch dimension).
    """
    s.patterns(func, [partial(generic_op.op, BUBBLE_UP_SLICES), transform.ApplyCanonicalizationPatternsOp])
    for name in (FUSE_PADS_PASS, CONCRETIZE_PADS_PASS):
        with _named("func"):
            func = transform.ApplyRegisteredPassOp(_any(), func, name).result
    if rank > 1:
        with _named("pads"):
            pads = structured.MatchOp.match_op_names(func, ["tensor.pad"]).result
        structured.TileUsingForOp(pads, sizes=[1] * (rank - 2) + [row, 0])
        s.patterns(func, [structured.ApplyTilingCanonicalizationPatternsOp, loop.ApplyForLoopCanonicalizationPatternsOp,
                          transform.ApplyCanonicalizationPatternsOp])
    with _named("func"):
        func = transform.ApplyRegisteredPassOp(_any(), func, VECTORIZE_PADS_PASS).result
    return func


def padded_input_rank(task: Task) -> int:
    """How many dimensions of the task's padded input (its own `tensor.pad`'s result; 0 without one) are not
    unit: the pad's rank as the strategy sees it, after IREE drops the unit batch dimension (a rank too low
    only tiles the pad into longer rows)."""
    module = parse_module(task.func_text, f"task {task.name}", shared_context())
    shapes = [ir.RankedTensorType(op.results[0].type).shape for op in walk(module.operation)
              if op.name == "tensor.pad"]
    return sum(1 for extent in shapes[0] if extent != 1) if shapes else 0


def pad_row_tile(tile: Sequence[int], elements: int) -> int:
    """The tile of a padded input tile's second-innermost dimension for its row copies (`tile`: its non-unit
    dimensions): 0 (whole rows) when a row of its two innermost dimensions holds at most `elements`, else the
    largest divisor whose rows do (a partial row would be a dynamic vector); 1, rows of the innermost dimension
    alone, when none does or without a budget (`PadRows` absent)."""
    if elements <= 0 or len(tile) < 2:
        return 1
    cols, inner = tile[-2], tile[-1]
    if cols * inner <= elements:
        return 0
    return max((d for d in divisors(cols) if d * inner <= elements), default=1)


def _mapped(sizes_by_root_dim: list[int], mapping: dict[int, int], rank: int, extra: dict[int, int]) -> list[int]:
    out = [0] * rank
    for mine, root_dim in mapping.items():
        out[mine] = sizes_by_root_dim[root_dim]
    for d, size in extra.items():
        out[d] = size
    return out


def render_strategy(sketch: Sketch, candidate: Candidate, task: Task, name: str) -> str:
    """The `transform.named_sequence @name` a candidate of a transform sketch stands for, printed."""
    with shared_context():
        library = build_strategy(sketch, candidate, task, name)
        return print_op(library.body.operations[0].operation) + "\n"


def build_strategy(sketch: Sketch, candidate: Candidate, task: Task, name: str) -> ir.Module:
    """A transform library holding the candidate's strategy `@name`, built and verified in the current context."""
    with ir.Location.unknown():
        library = ir.Module.create()
        library.operation.attributes[generic_op.WITH_NAMED_SEQUENCE] = ir.UnitAttr.get()
        with ir.InsertionPoint(library.body):
            sequence = transform.NamedSequenceOp(name, [_any()], [],
                                                 arg_attrs=[{"transform.readonly": ir.UnitAttr.get()}])
        sequence.bodyTarget.set_location(_named("module"))
        with ir.InsertionPoint(sequence.body):
            _emit_strategy(sketch, candidate, task, sequence.bodyTarget)
            transform.YieldOp([])
    verify(library.operation, f"strategy @{name}")
    return library


def _emit_strategy(sketch: Sketch, candidate: Candidate, task: Task, module: ir.Value) -> None:
    """The strategy's ops on the payload `module`, at the current insertion point."""
    if is_gpu_sketch(sketch):
        emit_gpu_strategy(sketch, candidate, task, module)
        return
    tiles = resolve(sketch, candidate, task)
    dag = tiles.dag
    assert dag is not None
    rfactor = sketch.has(Rfactor)
    # A micro-kernel's row tile that does not divide the tile above: the partial last row tile is peeled.
    peel = peeled_rows(tiles)
    ops = dag.ops
    root = ops[dag.root]
    s = _Script()
    if task.pads_input:
        with _named("pfunc"):
            pfunc = structured.MatchOp.match_op_names(module, ["func.func"]).result
        transform.ApplyRegisteredPassOp(_any(), pfunc, FOLD_UNIT_DIMS_PASS)
    implicit = sketch.has(ImplicitGemm)
    if implicit:
        # The convolution becomes im2col + contraction (the DAG `resolve` tiled: `space.implicit_gemm`).
        with _named("cfunc"):
            cfunc = structured.MatchOp.match_op_names(module, ["func.func"]).result
        transform.ApplyRegisteredPassOp(_any(), cfunc, IGEMM_PASS)
    with _named("ops"):
        matched = structured.MatchOp(_any(), module, interface=structured.MatchInterfaceEnum.LinalgOp).result
    if any(op.name not in GENERIC_OPS and has_window(op) for op in ops):
        with _named("ops"):
            matched = structured.GeneralizeOp(matched).result
    if len(ops) > 1:
        with _named("op"):
            handles = list(transform.SplitHandleOp([_any()] * len(ops), matched).results)
    else:
        handles = [matched]

    # 1. Workgroups: tile the last op, fuse every producer into its tile.
    last_map = dim_map(ops, dag.root, dag.last)
    dist = tiles.per_level.get("distribution", [0] * len(root.extents))
    wg_sizes = _mapped(dist, last_map, len(ops[dag.last].extents), {})
    if not any(wg_sizes):
        wg_sizes[0] = ops[dag.last].extents[0]
    mapping = generic_op.gpu_block_mapping(BLOCKS[-sum(1 for x in wg_sizes if x):])
    handles[dag.last], forall = structured.TileUsingForallOp(handles[dag.last], tile_sizes=wg_sizes,
                                                             mapping=mapping).results
    s.iree("transform.iree.populate_workgroup_count_region_using_num_threads_slice", forall)
    for i in range(dag.last - 1, -1, -1):
        handles[i], forall = s.fuse_into(handles[i], forall)
    im2col = None
    k_loop = None  # (loop, trips): the loop over the K tiles the im2col is gathered in, if short enough to unroll
    if implicit:
        with _named("im2col"):
            im2col = structured.MatchOp.match_op_names(module, [IM2COL]).result
        im2col, forall = s.fuse_into(im2col, forall)

    # 2. Consumers fused into the root's register tiles, or tiled on their own.
    inner = dag.consumers and tiles.choice(FUSION) == "inner"
    parallel_levels = [lv for lv in sketch.levels if LEVEL_KIND[lv] == SPATIAL and lv not in NOT_ROOT_LEVELS]
    extras = tiles.consumer_tiles
    if inner:
        for level in parallel_levels:
            sizes = _mapped(tiles.per_level[level], last_map, len(ops[dag.last].extents), extras.get(dag.last, {})
                            if level == "vector_common_parallel" else {})
            if not any(sizes):
                continue
            handles[dag.last], loops = s.tile_for(handles[dag.last], sizes)
            for i in range(dag.last - 1, -1, -1):
                handles[i], _ = s.fuse_into(handles[i], loops[-1])
            if im2col is not None and not is_register_level(level):
                im2col, _ = s.fuse_into(im2col, loops[-1])
            if peel is not None and level == "vector_common_parallel":
                # Fusion placed the ops in dispatch order (fills, root, the consumer chain; `peelable`).
                rows = next(mine for mine, theirs in last_map.items() if theirs == peel)
                parts = s.peel(loops[_loop_position(sizes, rows)])
                found = [s.ops_in(part, len(ops)) for part in parts]
                handles = [s.merge([part[i] for part in found]) for i in range(len(ops))]
        root_levels = [lv for lv in sketch.levels if LEVEL_KIND[lv] == REDUCTION]
    else:
        root_levels = [lv for lv in sketch.levels if lv not in NOT_ROOT_LEVELS]

    # 3. The root: cache and register levels, or the rfactor split. A padded root is padded along its
    # parallel loops before its reduction loops are tiled (the accumulator tile is padded once, outside
    # the reduction loop), and along its reduction loops inside it.
    padded = sketch.has(Pad)
    packed = sketch.has(Pack)
    parallel_dims = [d for d, it in enumerate(root.iterator_types) if it == "parallel"]
    # A packed root's row tiles (loops no packed operand reads) are cut after the packing, as GotoBLAS orders
    # its loops (`jc, pc, pack B, ic, jr, ir`): each `[kc, nc]` panel is packed once per workgroup and read by
    # every row tile of it. Cut before it, the panel was packed again for each row tile (TBS's 8x8 transposes
    # were as many instructions as its micro-kernel).
    deferred: tuple[int, ...] = ()
    # The accumulator's fill follows the root's parallel tiles down to its register tile (`fused_fill`).
    fill = None if inner else fused_fill(sketch, task, dag, tiles)
    for level in root_levels:
        sizes = tiles.per_level[level]
        if rfactor and level == "vector_reduction":
            continue
        tile = s.tile_fuse if fill is not None and LEVEL_KIND[level] == SPATIAL else s.tile_for
        if packed and level == "cache_parallel":
            deferred = tiles.deferred_row_tiles
            sizes = [0 if cut else size for size, cut in zip(sizes, deferred, strict=True)]
        if packed and is_register_level(level):
            if level == "vector_common_parallel":
                handles[dag.root] = _pack_root(s, handles[dag.root], dag, tiles, _pack_block(sketch))
                if fill is not None:
                    # The packed output's pad, reshape and identity transpose fold into the fill, which then
                    # feeds the packed root directly.
                    with _named("func"):
                        packed_func = structured.MatchOp.match_op_names(module, ["func.func"]).result
                    s.patterns(packed_func, [transform.ApplyCanonicalizationPatternsOp])
                if any(deferred):
                    handles[dag.root], loops = tile(handles[dag.root], [*deferred, 0])
                    if im2col is not None:
                        im2col, _ = s.fuse_into(im2col, loops[-1])
            sizes = _packed_sizes(sizes, dag)
        if padded and level == "vector_reduction":
            handles[dag.root] = s.pad(handles[dag.root], root, task.root.element_type, parallel_dims)
        if any(sizes):
            handles[dag.root], loops = tile(handles[dag.root], sizes)
            if im2col is not None and not is_register_level(level):
                # The im2col panel is gathered per cache tile (a stack buffer), reused by its register tiles.
                im2col, container = s.fuse_into(im2col, loops[-1])
                if tiles.unrolled_k_level is not None and tiles.unrolled_k_level[0] == level:
                    k_loop = (container, tiles.unrolled_k_level[1])
            if peel is not None and level == "vector_common_parallel":
                parts = s.peel(loops[_loop_position(sizes, peel)])
                # Each part holds the root, after its fused fill.
                count = 1 if fill is None else 2
                handles[dag.root] = s.merge([s.ops_in(part, count)[-1] for part in parts])
    if padded and root.reduction_dims:
        handles[dag.root] = s.pad(handles[dag.root], root, task.root.element_type, list(root.reduction_dims))
    decomposed = sketch.has(Decompose)
    if decomposed:
        # The register tile (unit oh and kh) becomes `linalg.conv_2d_nhwc_hwcf`, then a 1-D convolution
        # that the vectorizer handles with strided windows (several output pixels per tile).
        with _named("conv2d"):
            named = structured.SpecializeOp(_any(), handles[dag.root]).result
        with _named("conv1d"):
            handles[dag.root] = structured.DecomposeOp(named).result
    if rfactor:
        split_sizes = tiles.per_level.get("vector_reduction", [0] * len(root.extents))
        inner_red = [0] * len(root.extents)
        last_red = root.reduction_dims[-1]
        inner_red[last_red] = split_sizes[last_red]
        if inner_red[last_red]:
            split = structured.TileReductionUsingForOp([_any()], _any(), _any(), _any(), handles[dag.root],
                                                       tile_sizes=inner_red).split_op
            outer_red = [size if d != last_red else 0 for d, size in enumerate(split_sizes)]
            if any(outer_red):
                s.tile_for(split, outer_red)

    # 4. Fills and (outer) consumers get register tiles of their own.
    if not inner:
        reg = tiles.register
        for i, op in enumerate(ops):
            if i in (dag.root, fill):
                continue
            if op.is_fill:
                if dag.root in [j for j, o in enumerate(ops) if i in o.producers]:
                    rank = len(op.extents)
                    sizes = [reg[d] if d is not None and reg[d] != root.extents[d] else 0
                             for d in output_dims(root)][:rank]
                    if any(sizes):
                        handles[i], loops = s.tile_for(handles[i], sizes)
                        if peel is not None and (dist[peel] or root.extents[peel]) % reg[peel]:
                            # The fill's tile above is the workgroup's (the root's may be a cache tile).
                            s.peel(loops[_loop_position(sizes, output_dims(root).index(peel))])
                continue
            mapping_i = dim_map(ops, dag.root, i)
            sizes = [0] * len(op.extents)
            for mine, theirs in mapping_i.items():
                if reg[theirs] != root.extents[theirs]:
                    sizes[mine] = reg[theirs]
            for d, size in extras.get(i, {}).items():
                sizes[d] = size
            if any(sizes):
                handles[i], _ = s.tile_for(handles[i], sizes)

    # 4b. Padding: the other ops' partial register tiles become full, static tiles.
    if padded:
        for i, op in enumerate(ops):
            if i not in (dag.root, fill):
                handles[i] = s.pad(handles[i], op, task.root.element_type, list(range(len(op.extents))))

    # 4c. A window micro-kernel's rows (no vector spans them): single rows, unrolled, each reusing the filter
    # vectors (loaded once per reduction step, shared by CSE). The row loop is cut outside the reduction steps:
    # inside them, each step read, updated and wrote back every row's accumulator in turn and the writes
    # stayed in the hot loop as stores to the output (C2D's 4x16 tile: 24 stores per 24 FMAs, 0.45x IREE's
    # default; with the rows outside, 1.1x). The implicit GEMM's rows (`ow` of a stride-1 convolution, read
    # through `ow + kw`) are split too: once the unit window and channel loops fold away, their input is one
    # strided `vector<4xf32>` read, which IREE lowers on AVX2 to a loop inserting one element per iteration
    # (C2D 20x20x160->192 3x3 on Zen 3: 20 GFLOP/s, IREE's default; split, 55-58, 2.6-2.8x). A contraction's
    # rows (`A[i, k]`, read as `vector<4x1xf32>`, one broadcast per row) are not: split, the 512^3
    # example's 6x16 kernel ran 0.8x.
    kernel = sketch.step(MicroKernel)
    window_rows = (isinstance(kernel, MicroKernel) and tiles.register[kernel.rows] > 1
                   and (kernel.unrolled or read_through_window(root, kernel.rows)))
    row_loop = step_loop = None
    if window_rows:
        rows = [1 if d == kernel.rows else 0 for d in range(len(root.extents))]
        handles[dag.root], (row_loop,) = s.tile_for(handles[dag.root], rows)
    # 4d. A micro-kernel's reduction unroll: single reduction steps, unrolled, not one contraction over a
    # vector of `u` steps, which reads each row of `A` as a `u`-vector and broadcasts its elements with
    # shuffles; a single step's elements are scalar loads that broadcast from memory (`vbroadcastss`). On
    # Zen 3 the 512^3 example's 4x16 kernel with `u = 2` ran 0.62x the same kernel with `u = 1` (packed) and
    # 0.80x unpacked.
    unroll = tiles.register[root.reduction_dims[-1]] if isinstance(kernel, MicroKernel) else 1
    if unroll > 1:
        steps = [1 if d == root.reduction_dims[-1] else 0 for d in range(len(root.extents))]
        handles[dag.root], (step_loop,) = s.tile_for(handles[dag.root], steps)
    if step_loop is not None:
        loop.LoopUnrollOp(step_loop, factor=unroll)
    if row_loop is not None:
        loop.LoopUnrollOp(row_loop, factor=tiles.register[kernel.rows])

    # 5. Vectorize, cache write (hoist accumulators), bufferize, lower vectors.
    tiling_cleanup = [structured.ApplyTilingCanonicalizationPatternsOp, loop.ApplyForLoopCanonicalizationPatternsOp,
                      transform.ApplyCanonicalizationPatternsOp]
    with _named("func"):
        func = structured.MatchOp.match_op_names(module, ["func.func"]).result
    if task.pads_input:
        pad_rows = sketch.step(PadRows)
        row = pad_row_tile(tiles.padded_input_tile, pad_rows.elements if isinstance(pad_rows, PadRows) else 0)
        func = _fuse_pads(s, func, padded_input_rank(task), row)
    s.patterns(func, tiling_cleanup)
    if implicit:
        # The fused im2col tiles get destinations of their own (a slice of an empty tensor is an empty tile, not
        # a view of the whole im2col, which would be allocated), then become copies of input rows.
        s.patterns(func, [partial(generic_op.op, FOLD_TENSOR_EMPTY)])
        if k_loop is not None:
            # Constant K offsets: each tile's copies become vector loads of input channels.
            loop.LoopUnrollOp(k_loop[0], factor=k_loop[1])
            s.patterns(func, [transform.ApplyCanonicalizationPatternsOp])
        with _named("func"):
            func = transform.ApplyRegisteredPassOp(_any(), func, DECOMPOSE_IM2COL_PASS,
                                                   options={"unroll": False}).result
        s.patterns(func, tiling_cleanup)
    if not packed and not decomposed:
        # Unit window loops fold away so window tiles vectorize as contractions. A packed root has no
        # windows, and its output tile has an interior unit loop (`[1, 8, 1, 32]`), which the fold breaks;
        # a 1-D convolution would fold back into a generic the vectorizer cannot handle.
        s.patterns(func, [structured.ApplyFoldUnitExtentDimsViaSlicesPatternsOp,
                          transform.ApplyCanonicalizationPatternsOp])
    with _named("vfunc"):
        vfunc = structured.VectorizeChildrenAndApplyPatternsOp(func, vectorize_padding=padded).result
    s.patterns(vfunc, tiling_cleanup)
    if window_rows:
        # Each row's accumulator is read as `vector<16xf32>` and written as `vector<1x1x1x16xf32>`: unmatched,
        # the pair is not hoisted out of the window loops (8 stores per 24 FMAs in C2D's hot loop). Dropping
        # the leading unit dims makes the pairs match.
        s.patterns(vfunc, [vector.ApplyCastAwayVectorLeadingOneDimPatternsOp])
    transform.ApplyCommonSubexpressionEliminationOp(vfunc)
    if tiles.choice(CACHE_WRITE) in (None, "hoist"):
        with _named("loops"):
            loops = structured.MatchOp.match_op_names(vfunc, ["scf.for"]).result
        foreach = transform.ForeachOp([], [loops])
        each = foreach.bodyTargets[0]
        each.set_location(_named("loop"))
        with ir.InsertionPoint(foreach.body):
            loop.HoistLoopInvariantSubsetsOp(each)
            transform.YieldOp([])
        s.patterns(vfunc, [transform.ApplyCanonicalizationPatternsOp])
    s.iree("transform.iree.eliminate_empty_tensors", module)
    with _named("bfunc"):
        (bfunc,) = s.iree("transform.iree.bufferize", vfunc, results=1)
    with _named("mfunc"):
        mfunc = structured.MatchOp.match_op_names(bfunc, ["func.func"]).result
    s.iree("transform.iree.forall_to_workgroup", mfunc)
    if padded or packed or implicit:
        # Pads that stay materialised (a fused consumer's input tile) and packed panels inside cache loops
        # bufferize to stack buffers in the loop.
        s.iree("transform.iree.hoist_static_alloc", mfunc)
    s.patterns(mfunc, [transform.ApplyCanonicalizationPatternsOp])
    transform.ApplyCommonSubexpressionEliminationOp(mfunc)
    lowering = CONTRACTION_LOWERINGS[tiles.choice(LOWERING) or "outerproduct"]
    s.patterns(mfunc, [partial(vector.ApplyLowerContractionPatternsOp, lowering_strategy=lowering)])
    s.patterns(mfunc, [vector.ApplyLowerOuterProductPatternsOp])
    strategy = REDUCTION_LOWERINGS[tiles.choice(REDUCTION_LOWERING) or "innerparallel"]
    s.patterns(mfunc, [partial(pattern, lowering_strategy=strategy) for pattern in (
        vector.ApplyReorderMultiReductionPatternsOp, vector.ApplyMultiReductionFlatteningPatternsOp,
        vector.ApplyMultiReductionUnrollingPatternsOp)])
    s.patterns(mfunc, [vector.ApplyLowerTransposePatternsOp])
    s.patterns(mfunc, [vector.ApplyTransferPermutationPatternsOp,
                       partial(vector.ApplyLowerTransferPatternsOp, max_transfer_rank=1)])
    s.patterns(mfunc, [vector.ApplyLowerShapeCastPatternsOp, vector.ApplyLowerBroadcastPatternsOp])
    s.patterns(mfunc, [transform.ApplyCanonicalizationPatternsOp])
    transform.ApplyCommonSubexpressionEliminationOp(mfunc)
    with _named("none"):
        none = transform.ParamConstantOp(transform.AnyParamType.get(), no_pipeline_translation_info()).result
    transform.AnnotateOp(mfunc, "translation_info", param=none)


def fused_fill(sketch: Sketch, task: Task, dag: Dag, tiles: Resolved) -> int | None:
    """The fill initializing the root's accumulator, when the root's parallel tiles carry it down to the register
    tile (`transform.structured.fuse`): its accumulators then start at zero in registers. None where the fill
    gets tiles of its own, a separate pass writing zeros over the workgroup's output that the root reads back.

    Fused, TBS's packed 4x16 kernel (one thread, Zen 3) ran 1.10x faster: the zeros had been written over a
    384 KB output tile, then read back by every register tile. `fuse` takes every producer it can tile, so the
    rule holds only where the fill is the root's one producer: no padded input (its pad is fused into the
    workgroup tile), no im2col (fused per cache tile), no other op feeding an input; and neither an rfactor
    split nor padded register tiles (the padding sketch pads the fill's tiles on their own). And
    only where every parallel tile comes before the reduction tiles (`SSRR`): below a reduction loop the
    fill cannot follow (it would zero the accumulators on every reduction step, and `fuse` does not reach
    it), so in `SRSR` it stopped at the cache tile as one unblocked fill (CAP: 0.97x).
    """
    if not _parallel_tiles_first(sketch, tiles):
        return None
    root = dag.ops[dag.root]
    init = root.producers[root.num_inputs] if len(root.producers) > root.num_inputs else -1
    if init < 0 or not dag.ops[init].is_fill or not root.reduction_dims:
        return None
    if any(p >= 0 for p in root.producers[:root.num_inputs]):
        return None
    if task.pads_input or any(sketch.has(step) for step in (ImplicitGemm, Rfactor, Pad)):
        return None
    return init


def _parallel_tiles_first(sketch: Sketch, tiles: Resolved) -> bool:
    """Whether the root's loops are cut parallel levels first, then reductions (`SSRR`): no parallel tile
    is cut inside a reduction loop. A packed root's deferred row tiles are cut at the register level."""
    kinds = []
    for level in sketch.levels:
        if level in NOT_ROOT_LEVELS:
            continue
        cut = any(tiles.per_level.get(level, ()))
        if level == "vector_common_parallel" and sketch.has(Pack):
            cut = cut or any(tiles.deferred_row_tiles)
        if cut:
            kinds.append(LEVEL_KIND[level])
    return REDUCTION not in kinds or SPATIAL not in kinds[kinds.index(REDUCTION):]


def _pack_root(s: _Script, handle: ir.Value, dag: Dag, tiles: Resolved, block: int = 0) -> ir.Value:
    """Pack the root's operands along the vector loop by the register tile `nr`, above the register levels.

    Every operand indexed by the vector loop gets a `[..., nr]` inner tile
    (`transform.structured.pack`): the output's is a reshape (the vector loop
    is already innermost), a transposed input's (`K[j, h, k]` ->
    `[j/nr, h, k, nr]`) is a real transpose, tiled into `block x block`
    vector transposes where `block` divides `nr` (`Pack.block`; else, or 0,
    `gcd(k, nr) x nr`). The packed root has one more loop (the inner `nr`).

    LLVM transposes a 4x4 f32 block with in-lane shuffles; a 32x32 block (TBS's `nr`) took index-vector
    permutes and spilled: 2288 instructions per block, 225 spill stores, and the packing cost 15% of the
    call (AVX-512 Intel guest, TBS(1,128,12,64): 173 -> 150 us with 4x4 blocks, 8x8 157, 16x16 171).
    """
    root = dag.ops[dag.root]
    vector_dim = vector_loop(root)
    nr = tiles.register[vector_dim]
    extents = tiles.above_register
    sizes = [nr if d == vector_dim else 0 for d in range(len(root.extents))]
    with _named("packed"):
        packed = structured.PackOp(_op_type("linalg.generic"), handle, [], static_packed_sizes=sizes).result
    for operand, dims in operands_along(root, vector_dim):
        with _named("pack"):
            pack = transform.GetProducerOfOperand(_op_type("linalg.pack"), packed, operand).result
        lowered = structured.LowerPackOp(_op_type("tensor.pad"), _op_type("tensor.expand_shape"),
                                         _op_type("linalg.transpose"), pack).results
        if operand < root.num_inputs:
            # The transpose's loops are the packed operand's dims: tile all but its two innermost.
            inner = dims[-1][0]
            side = block if block and nr % block == 0 else nr
            transpose_tiles = [1] * len(dims) + [side if side < nr else 0]
            transpose_tiles[-2] = gcd(extents[inner], side)
            s.tile_for(lowered[2], transpose_tiles)
    with _named("unpack"):
        unpack = transform.GetConsumersOfResult(_op_type("linalg.unpack"), packed, 0).result
    structured.LowerUnPackOp(_op_type("tensor.empty"), _op_type("linalg.transpose"), _op_type("tensor.collapse_shape"),
                             _op_type("tensor.extract_slice"), _op_type("linalg.copy"), unpack)
    with _named("packed_any"):
        return transform.CastOp(_any(), packed).result


def _pack_block(sketch: Sketch) -> int:
    """The transpose block of a packed sketch's `Pack` step (0 for a trace recorded without one)."""
    pack = sketch.step(Pack)
    return pack.block if isinstance(pack, Pack) else 0


def _loop_position(sizes: list[int], dim: int) -> int:
    """Index, among the loops `tile_using_for` makes for `sizes` (one per non-zero size), of loop `dim`'s."""
    return sum(1 for size in sizes[:dim] if size)


def _packed_sizes(sizes: list[int], dag: Dag) -> list[int]:
    """A register level's tile sizes in the packed root's loops: the vector loop counts whole `nr` blocks."""
    vector_dim = vector_loop(dag.ops[dag.root])
    out = list(sizes) + [0]
    out[vector_dim] = 1 if sizes[vector_dim] else 0
    return out


def strategy_name(task: Task, candidate: Candidate) -> str:
    return f"ansor_strategy_{task.key}_s{candidate.sketch_index}"

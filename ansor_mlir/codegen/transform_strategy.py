"""Emit a transform sketch's candidate as the transform-dialect strategy IREE runs.

A sketch of this family *is* the codegen of its dispatch: a
`transform.named_sequence` that IREE runs instead of one of its pipelines
(`#iree_codegen.transform_dialect_codegen`). The strategy replays the
sketch's trace over the dispatch's DAG as IREE's codegen sees it
(`Task.codegen_ops`), from the last op to the first, as Ansor does: it is
built in phases (`steps.step_kind.PHASES`: workgroups, the consumer chain,
the root's cache and register levels, the other ops' tiles, unrolling), each
phase walking the trace's steps and letting each kind emit its part
(`steps`: tiling and fusion, packing, padding, decomposition, rfactor,
micro-kernels, implicit GEMM). The fixed tail is this module's, run as the
steps configure it (`Settings`): a dispatch's own input pad is moved into
the workgroup tile, unit dimensions are folded so convolution windows
vectorize as contractions, then everything is vectorized, accumulators
hoisted out of the reduction loops (cache write), bufferized and the vectors
lowered with the chosen lowerings.

Where the root's parallel tiles all come before its reduction tiles, its
accumulator's fill is fused with them down to the register tile
(`fused_fill`), so the accumulators start at zero in registers.

The strategy is built with the bindings' transform builders (IREE's own
`transform.iree.*` ops through the generic fallback) and verified as it is
built, so a mistake here fails at once instead of as a candidate that does
not compile. `render_strategy` prints it deterministically: a candidate
always rebuilds the byte-identical script.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from iree.compiler import ir
from iree.compiler.dialects import transform
from iree.compiler.dialects.transform import loop, structured, vector

from ansor_mlir.codegen.gpu_transform_strategy import emit_gpu_strategy
from ansor_mlir.codegen.iree_config import no_pipeline_translation_info
from ansor_mlir.core.schedule import LEVEL_KIND, REDUCTION, SPATIAL, Candidate, Sketch
from ansor_mlir.core.task import Task
from ansor_mlir.mlir import generic_op
from ansor_mlir.mlir.context import parse_module, print_op, shared_context, verify, walk
from ansor_mlir.space.annotation import divisors
from ansor_mlir.space.dag import Dag, has_window
from ansor_mlir.space.gpu_mapping import is_gpu_sketch
from ansor_mlir.space.resolve import Resolved, resolve
from ansor_mlir.steps.registry import kind_of, kinds_of
from ansor_mlir.steps.script import TILING_CLEANUP, Script, any_op, match_func, named
from ansor_mlir.steps.step_kind import PHASES, Emission, settings_of
from ansor_mlir.steps.tile_and_fuse import NOT_ROOT_LEVELS

# Slices move above reshapes, so a padded input reshaped on its way to the root is sliced right after its pad;
# IREE's passes then swap the workgroup's slice of the pad into a pad of a slice, and vectorize that pad.
BUBBLE_UP_SLICES = "transform.apply_patterns.tensor.bubble_up_extract_slice"
FUSE_PADS_PASS = "iree-codegen-fuse-tensor-pad-with-consumer"
CONCRETIZE_PADS_PASS = "iree-codegen-concretize-pad-result-shape"
VECTORIZE_PADS_PASS = "iree-codegen-vectorize-tensor-pad"
# IREE folds a fused pad's unit batch dimension (`collapse_shape`, a 3-D pad, `expand_shape`) when it builds a
# flow-level module (the tuner's candidates, `OUT.mlir`), but not inside a dispatch region the program already
# holds (the pad-fusion rewrite's, which a tuning spec meets): there the pad stays 4-D and a row of it spans
# a whole `WxC` plane, several times slower (docs/reports/measurement_fidelity.md). The strategy folds them first,
# so both flows see one IR (on a flow-level module the pass changes nothing).
FOLD_UNIT_DIMS_PASS = "iree-dispatch-creation-fold-unit-extent-dims-for-func"
# A dispatch that stores its result into part of its output (a consumer's pad folded into the store: offsets into a
# larger binding) reaches the strategy with an `iree_linalg_ext.map_store` after the root, where IREE could not fold
# the unit batch dimension it added at codegen into the store. Left there, the map_store reads the whole result, so
# bufferization puts all of it on the stack (3.2 MB for ResNet's first convolution, over IREE's 32 KiB limit).
# IREE's own pass moves it into the workgroup loop's terminator, each workgroup storing its own tile.
COMBINE_RESULT_LAYOUT_PASS = "iree-codegen-combine-result-layout-transformation"
# Linalg ops a strategy tiles as they are. A named op with windowed inputs (a named convolution or pooling)
# vectorizes only as a 1-D convolution: it becomes a generic first, which the vectorizer takes once its unit
# window loops fold away (a decomposed sketch specializes it back).
GENERIC_OPS = ("linalg.generic", "linalg.fill")
# Knob options, as the transform dialect spells them, to the bindings' enums.
CONTRACTION_LOWERINGS = {e.name.lower(): e for e in vector.VectorContractLowering}
REDUCTION_LOWERINGS = {e.name.lower(): e for e in vector.VectorMultiReductionLowering}


def _fuse_pads(s: Script, func: ir.Value, rank: int, row: int) -> ir.Value:
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
        with named("func"):
            func = transform.ApplyRegisteredPassOp(any_op(), func, name).result
    if rank > 1:
        with named("pads"):
            pads = structured.MatchOp.match_op_names(func, ["tensor.pad"]).result
        structured.TileUsingForOp(pads, sizes=[1] * (rank - 2) + [row, 0])
        s.patterns(func, [structured.ApplyTilingCanonicalizationPatternsOp, loop.ApplyForLoopCanonicalizationPatternsOp,
                          transform.ApplyCanonicalizationPatternsOp])
    with named("func"):
        func = transform.ApplyRegisteredPassOp(any_op(), func, VECTORIZE_PADS_PASS).result
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
            sequence = transform.NamedSequenceOp(name, [any_op()], [],
                                                 arg_attrs=[{"transform.readonly": ir.UnitAttr.get()}])
        sequence.bodyTarget.set_location(named("module"))
        with ir.InsertionPoint(sequence.body):
            _emit_strategy(sketch, candidate, task, sequence.bodyTarget)
            transform.YieldOp([])
    verify(library.operation, f"strategy @{name}")
    return library


def _emit_strategy(sketch: Sketch, candidate: Candidate, task: Task, module: ir.Value) -> None:
    """The strategy's ops on the payload `module`, at the current insertion point: the trace's steps phase by
    phase, then vectorization, bufferization and vector lowering."""
    if is_gpu_sketch(sketch):
        emit_gpu_strategy(sketch, candidate, task, module)
        return
    e = _start(sketch, candidate, task, module)
    e.run("prepare")
    e.handles = _match_ops(e)
    for phase in PHASES:
        e.run(phase)
    _vectorize(e)
    _bufferize(e)
    _lower_vectors(e)


def _start(sketch: Sketch, candidate: Candidate, task: Task, module: ir.Value) -> Emission:
    """The emission state of a candidate: its loop structure, its steps' kinds and settings, the fused fill."""
    resolved = resolve(sketch, candidate, task)
    assert resolved.dag is not None
    steps = kinds_of(sketch)
    fill = None if resolved.consumers_inner else fused_fill(sketch, task, resolved.dag, resolved)
    if task.pads_input:
        transform.ApplyRegisteredPassOp(any_op(), match_func(module, "pfunc"), FOLD_UNIT_DIMS_PASS)
    return Emission(Script(), resolved, module, settings_of(steps, resolved), steps, fill)


def _match_ops(e: Emission) -> list[ir.Value]:
    """Handles to the dispatch's linalg ops, in DAG order (windowed named ops generalized)."""
    ops = e.dag.ops
    with named("ops"):
        matched = structured.MatchOp(any_op(), e.module, interface=structured.MatchInterfaceEnum.LinalgOp).result
    if any(op.name not in GENERIC_OPS and has_window(op) for op in ops):
        with named("ops"):
            matched = structured.GeneralizeOp(matched).result
    if len(ops) == 1:
        return [matched]
    with named("op"):
        return list(transform.SplitHandleOp([any_op()] * len(ops), matched).results)


def _vectorize(e: Emission) -> None:
    """Pad fusion (a dispatch's own input pad), the steps' rewrites, unit dims folded, vectorization, the
    accumulators hoisted out of the reduction loops."""
    s, settings = e.script, e.settings
    func = match_func(e.module)
    if e.task.pads_input:
        row = pad_row_tile(e.resolved.padded_input_tile, settings.pad_row_elements)
        func = _fuse_pads(s, func, padded_input_rank(e.task), row)
    s.patterns(func, TILING_CLEANUP)
    e.func = func
    for kind, step in e.steps:
        kind.before_vectorize(step, e)
    if settings.fold_unit_dims:
        fold = (structured.ApplyFoldUnitExtentDimsViaReshapesPatternsOp if settings.fold_unit_dims_via_reshapes
                else structured.ApplyFoldUnitExtentDimsViaSlicesPatternsOp)
        s.patterns(e.func, [fold, transform.ApplyCanonicalizationPatternsOp])
    with named("vfunc"):
        e.func = structured.VectorizeChildrenAndApplyPatternsOp(e.func,
                                                                vectorize_padding=settings.vectorize_padding).result
    s.patterns(e.func, TILING_CLEANUP)
    for kind, step in e.steps:
        kind.after_vectorize(step, e)
    transform.ApplyCommonSubexpressionEliminationOp(e.func)
    if settings.hoist_accumulators:
        with named("loops"):
            loops = structured.MatchOp.match_op_names(e.func, ["scf.for"]).result
        foreach = transform.ForeachOp([], [loops])
        each = foreach.bodyTargets[0]
        each.set_location(named("loop"))
        with ir.InsertionPoint(foreach.body):
            loop.HoistLoopInvariantSubsetsOp(each)
            transform.YieldOp([])
        s.patterns(e.func, [transform.ApplyCanonicalizationPatternsOp])


def _bufferize(e: Emission) -> None:
    """Bufferized, workgroups mapped, stack buffers hoisted where steps allocate them inside loops; `e.func`
    becomes the bufferized function."""
    s = e.script
    assert e.func is not None
    if e.task.stores_into_slice:
        with named("lfunc"):
            e.func = transform.ApplyRegisteredPassOp(any_op(), e.func, COMBINE_RESULT_LAYOUT_PASS,
                                                     options={"scope": "workgroup"}).result
    s.iree("transform.iree.eliminate_empty_tensors", e.module)
    with named("bfunc"):
        (bfunc,) = s.iree("transform.iree.bufferize", e.func, results=1)
    e.func = match_func(bfunc, "mfunc")
    s.iree("transform.iree.forall_to_workgroup", e.func)
    if e.settings.hoist_static_alloc:
        s.iree("transform.iree.hoist_static_alloc", e.func)
    s.patterns(e.func, [transform.ApplyCanonicalizationPatternsOp])
    transform.ApplyCommonSubexpressionEliminationOp(e.func)


def _lower_vectors(e: Emission) -> None:
    """Vector contractions, reductions, transposes, transfers and shape casts lowered as the steps chose; the
    function marked as already translated."""
    s, mfunc = e.script, e.func
    assert mfunc is not None
    lowering = CONTRACTION_LOWERINGS[e.settings.contraction_lowering]
    s.patterns(mfunc, [partial(vector.ApplyLowerContractionPatternsOp, lowering_strategy=lowering)])
    s.patterns(mfunc, [vector.ApplyLowerOuterProductPatternsOp])
    strategy = REDUCTION_LOWERINGS[e.settings.reduction_lowering]
    s.patterns(mfunc, [partial(pattern, lowering_strategy=strategy) for pattern in (
        vector.ApplyReorderMultiReductionPatternsOp, vector.ApplyMultiReductionFlatteningPatternsOp,
        vector.ApplyMultiReductionUnrollingPatternsOp)])
    s.patterns(mfunc, [vector.ApplyLowerTransposePatternsOp])
    s.patterns(mfunc, [vector.ApplyTransferPermutationPatternsOp,
                       partial(vector.ApplyLowerTransferPatternsOp, max_transfer_rank=1)])
    s.patterns(mfunc, [vector.ApplyLowerShapeCastPatternsOp, vector.ApplyLowerBroadcastPatternsOp])
    s.patterns(mfunc, [transform.ApplyCanonicalizationPatternsOp])
    transform.ApplyCommonSubexpressionEliminationOp(mfunc)
    with named("none"):
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
    if task.pads_input or not all(kind_of(step).fill_fusable for step in sketch.steps):
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
        if level == "vector_common_parallel":
            cut = cut or any(tiles.deferred_row_tiles)
        if cut:
            kinds.append(LEVEL_KIND[level])
    return REDUCTION not in kinds or SPATIAL not in kinds[kinds.index(REDUCTION):]


def strategy_name(task: Task, candidate: Candidate) -> str:
    return f"ansor_strategy_{task.key}_s{candidate.sketch_index}"

"""`ImplicitGemm`: a convolution rewritten by IREE into im2col + contraction before it is tiled
(`iree-codegen-convolution-to-igemm`; the contraction's loops are `space.implicit_gemm`'s).

The im2col is fused into the workgroup tile and gathered per cache tile (a
stack buffer its register tiles reuse), then decomposed into row copies. IREE
vectorizes those copies only at K offsets it can prove aligned to the input
channels: the loop over a short run of K tiles is unrolled around them.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from iree.compiler import ir
from iree.compiler.dialects import transform
from iree.compiler.dialects.transform import loop, structured

from ansor_mlir.core.schedule import ImplicitGemm, is_register_level
from ansor_mlir.mlir import generic_op
from ansor_mlir.space.dag import Dag
from ansor_mlir.space.implicit_gemm import implicit_gemm_dag, unrolled_k_tiles
from ansor_mlir.space.resolved import Resolved
from ansor_mlir.steps.script import TILING_CLEANUP, any_op, match_func, named
from ansor_mlir.steps.step_kind import Emission, Settings, StepKind

IGEMM_PASS = "iree-codegen-convolution-to-igemm"
IM2COL = "iree_linalg_ext.im2col"
DECOMPOSE_IM2COL_PASS = "iree-linalg-ext-decompose-im2col"
FOLD_TENSOR_EMPTY = "transform.apply_patterns.tensor.fold_tensor_empty"


def unrolled_k_level(resolved: Resolved) -> tuple[str, int] | None:
    """The level whose K loop the strategy unrolls around the im2col gather, and its trip count: the last level
    above the registers that tiles K alone (`unrolled_k_tiles`)."""
    trips = [(level, unrolled_k_tiles(resolved.root, sizes)) for level, sizes in resolved.per_level.items()
             if level != "distribution" and not is_register_level(level)]
    return next(((level, n) for level, n in reversed(trips) if n), None)


class ImplicitGemmKind(StepKind[ImplicitGemm]):
    step = ImplicitGemm
    fill_fusable = False  # the im2col is fused per cache tile

    def rewrite_dag(self, step: ImplicitGemm, dag: Dag) -> Dag | None:
        return implicit_gemm_dag(dag)

    def refine(self, step: ImplicitGemm, resolved: Resolved) -> Resolved:
        return replace(resolved, unrolled_k_level=unrolled_k_level(resolved))

    def stack_bytes(self, step: ImplicitGemm, resolved: Resolved) -> int:
        return resolved.im2col_panel_bytes * resolved.im2col_buffers

    def configure(self, step: ImplicitGemm, resolved: Resolved, settings: Settings) -> Settings:
        # The im2col panels inside cache loops bufferize to stack buffers in the loop.
        return replace(settings, hoist_static_alloc=True)

    def prepare(self, step: ImplicitGemm, e: Emission) -> None:
        """The convolution becomes im2col + contraction (the DAG `resolve` tiled)."""
        transform.ApplyRegisteredPassOp(any_op(), match_func(e.module, "cfunc"), IGEMM_PASS)

    def into_workgroup(self, step: ImplicitGemm, e: Emission) -> None:
        with named("im2col"):
            im2col = structured.MatchOp.match_op_names(e.module, [IM2COL]).result
        assert e.forall is not None
        e.im2col, e.forall = e.script.fuse_into(im2col, e.forall)

    def after_chain_tile(self, step: ImplicitGemm, e: Emission, level: str, sizes: list[int],
                         loops: list[ir.Value]) -> None:
        if not is_register_level(level):
            e.fuse_im2col(loops[-1])

    def after_root_tile(self, step: ImplicitGemm, e: Emission, level: str, sizes: tuple[int, ...],
                        loops: list[ir.Value]) -> None:
        """The im2col panel is gathered per cache tile (a stack buffer), reused by its register tiles."""
        if is_register_level(level):
            return
        container = e.fuse_im2col(loops[-1])
        unrolled = e.resolved.unrolled_k_level
        if unrolled is not None and unrolled[0] == level:
            assert container is not None
            e.k_loop = (container, unrolled[1])

    def before_vectorize(self, step: ImplicitGemm, e: Emission) -> None:
        """The fused im2col tiles get destinations of their own (a slice of an empty tensor is an empty tile, not
        a view of the whole im2col, which would be allocated), then become copies of input rows."""
        assert e.func is not None
        s = e.script
        s.patterns(e.func, [partial(generic_op.op, FOLD_TENSOR_EMPTY)])
        if e.k_loop is not None:
            # Constant K offsets: each tile's copies become vector loads of input channels.
            loop.LoopUnrollOp(e.k_loop[0], factor=e.k_loop[1])
            s.patterns(e.func, [transform.ApplyCanonicalizationPatternsOp])
        with named("func"):
            e.func = transform.ApplyRegisteredPassOp(any_op(), e.func, DECOMPOSE_IM2COL_PASS,
                                                     options={"unroll": False}).result
        s.patterns(e.func, TILING_CLEANUP)

"""Reading a kernel's hot loop from assembly: FMAs, broadcasts, spills, gathers, nested loops."""

from __future__ import annotations

from ansor_mlir.measure.kernel_asm import hot_and_spilling, hot_loop, innermost_loops

CLEAN = """
kernel:
\tmovq\t$-4, %rcx
.LBB0_1:
\txorl\t%eax, %eax
.LBB0_2:
\tvmovups\t-64(%r15), %zmm23
\tvmovups\t(%r15), %zmm24
\tvbroadcastss\t-12(%r13,%rcx,4), %zmm25
\tvfmadd231ps\t%zmm23, %zmm25, %zmm1
\tvfmadd231ps\t%zmm24, %zmm25, %zmm2
\tvfmadd231ps\t16(%r13,%rcx,4){1to16}, %zmm23, %zmm3
\taddq\t$4, %rcx
\tjb\t.LBB0_2
\tvmovaps\t%zmm1, -56(%rsp)
\taddq\t$1, %rax
\tjne\t.LBB0_1
\tretq
"""

SPILLING = """
.LBB1_4:
\tvmovups\t(%rdx), %zmm0
\tvmovaps\t%zmm5, -120(%rsp)
\tvbroadcastss\t(%rax), %zmm5
\tvfmadd231ps\t%zmm0, %zmm5, %zmm1
\tvmovaps\t-120(%rsp), %zmm5
\tvgatherdps\t(%rax,%zmm7,4), %zmm6 {%k1}
\tvmovups\t(%rsp,%rbx,4), %zmm8
\tjne\t.LBB1_4
"""


def test_the_innermost_loop_is_the_one_without_loops_inside():
    loops = innermost_loops(CLEAN)
    assert [label for label, _ in loops] == [".LBB0_2"]


def test_a_clean_micro_kernel_has_fmas_and_no_spills():
    loop = hot_loop(CLEAN)
    assert (loop.fmas, loop.fmas_with_memory, loop.vector_loads, loop.broadcasts) == (3, 1, 2, 2)
    assert loop.spills == 0 and loop.is_micro_kernel  # the store after the loop is not in it


def test_spills_and_gathers_are_found_and_indexed_stack_buffers_are_data():
    loop = hot_loop(SPILLING)
    assert (loop.stack_stores, loop.stack_loads, loop.gathers) == (1, 1, 1)
    assert loop.vector_loads == 3  # (%rdx), the reload, and a panel walked with an index register
    assert not loop.is_micro_kernel
    assert hot_loop("\tretq\n") is None


def test_accumulators_stored_in_the_loop_are_no_micro_kernel():
    """Accumulators written back to the output each iteration (a direct convolution whose row tiles were cut
    inside its reduction steps) are stores beside the FMAs, not spills."""
    storing = CLEAN.replace("\taddq\t$4, %rcx", "\tvmovups\t%zmm1, 64(%r11,%r14,4)\n\taddq\t$4, %rcx")
    loop = hot_loop(storing)
    assert (loop.vector_stores, loop.spills) == (1, 0) and not loop.is_micro_kernel
    assert hot_loop(CLEAN).vector_stores == 0


def test_library_code_linked_beside_the_dispatch_is_not_the_hot_loop():
    """IREE links libm into the executable: its loops (more FMAs than a 2x32 AVX2 kernel) are not the kernel."""
    library = "log:\n" + SPILLING.replace("vfmadd231ps\t%zmm0, %zmm5, %zmm1", "vfmadd231ps\t%zmm0, %zmm5, %zmm1\n" * 5)
    dispatch = CLEAN.replace("kernel:", "mm_dispatch_0_matmul_128x128x128_f32:")
    assert hot_loop(library).fmas == 5
    loop = hot_loop(dispatch + library)
    assert loop.label == ".LBB0_2" and loop.is_micro_kernel


def test_broadcasts_of_registers_are_shuffles_and_broadcasts_from_memory_are_loads():
    """A row of `A` loaded as a vector and split into broadcasts (what a contraction over two reduction steps
    lowered to) takes vector pipes beside the FMAs; scalar broadcasts from memory do not."""
    split = """
.LBB2_1:
\tvmovsd\t-6136(%r14,%r13,4), %xmm10
\tvmovups\t-2048(%r11), %ymm8
\tvbroadcastss\t%xmm10, %ymm11
\tvmovshdup\t%xmm10, %xmm10
\tvbroadcastss\t%xmm10, %ymm10
\tvfmadd231ps\t%ymm8, %ymm11, %ymm4
\tvfmadd231ps\t%ymm8, %ymm10, %ymm5
\tjne\t.LBB2_1
"""
    assert hot_loop(split).shuffles == 3
    assert hot_loop(CLEAN).shuffles == 0


def test_a_spilling_loop_beside_a_clean_hot_loop_is_found():
    """TBS's panel packing spilled beside a clean micro-kernel: the hot loop alone did not show it."""
    hot, spilling = hot_and_spilling([CLEAN, SPILLING])
    assert hot.label == ".LBB0_2" and hot.is_micro_kernel
    assert spilling == [".LBB1_4"]
    assert hot_and_spilling([CLEAN])[1] == []
    hot, spilling = hot_and_spilling([SPILLING])
    assert hot.label == ".LBB1_4" and spilling == []  # the hot loop's own spills are its verdict's, not counted

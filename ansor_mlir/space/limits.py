"""What a candidate may use of its target: the validity limits annotation checks, derived from the `Target`.

None of them is a constant fitted to one machine: a 16 KiB vector is fine on
an AVX-512 CPU and rejected by IREE on an AVX2 one, and a register tile
that fits 32 zmm registers spills on 16 ymm ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansor_mlir.core.target import Target

# IREE rejects a dispatch whose largest vector reaches `Target.vector_limit_bytes` (a vector of exactly 16384 bytes
# failed on znver3), counting every vector of the dispatch after its own lowering: a fused consumer's, a broadcast
# operand's, which can be larger than the root's register tile we check. Half the limit keeps clear of it, and keeps
# unrolled vector code (and compile time) small; on AVX-512 it is the 16 KiB the search always used.
VECTOR_LIMIT_DIVISOR = 2
# Registers an outer-product register tile needs besides its accumulators: the vectors of one row of the B panel
# and a broadcast of A (6x16 f32 on AVX2: 12 accumulators + 2 + 1 of 16 ymm; 14x32 on AVX-512: 28 + 2 + 1 of 32 zmm).
OPERAND_REGISTERS = 4


@dataclass(frozen=True)
class Limits:
    """Upper bounds, in bytes, on what one candidate may create."""

    # The largest vector (a register tile of the root or of a consumer, as a flat vector).
    vector_bytes: int
    # Accumulators live across the reduction loop: they must stay in vector registers.
    accumulator_bytes: int
    # Stack buffers of one workgroup (output tiles IREE allocates, packed and padded panels).
    stack_bytes: int


def limits(target: Target) -> Limits:
    """The limits of `target`: from IREE's vector-size and stack limits and the vector register file."""
    registers = max(1, target.vector_registers - OPERAND_REGISTERS)
    return Limits(
        vector_bytes=target.vector_limit_bytes // VECTOR_LIMIT_DIVISOR,
        accumulator_bytes=registers * target.vector_bytes,
        stack_bytes=target.stack_limit_bytes,
    )


@dataclass(frozen=True)
class GpuLimits:
    """What one block of a GPU candidate may use, from the target's `GpuSpec`."""

    warp_size: int
    max_threads: int
    shared_memory_bytes: int
    # Threads along a block's x, y, z.
    max_block_dims: tuple[int, ...]
    # 32-bit accumulators one thread may hold: half its registers, the rest for operands and addresses.
    accumulator_registers: int


def gpu_limits(target: Target) -> GpuLimits:
    """The limits of a CUDA target: IREE's threads and shared memory per block, the warp and register file."""
    gpu = target.gpu
    if gpu is None:
        raise ValueError(f"target {target.key} has no GPU")
    return GpuLimits(gpu.warp_size, gpu.max_threads, gpu.shared_memory_bytes, gpu.max_block_dims,
                     gpu.registers_per_thread // 2)

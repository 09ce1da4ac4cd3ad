"""Hand-written register-blocked matmul kernels in C, to time beside a tuned matmul.

A tuned program's share of the peak says how far it is from the FMA units'
limit, not how far from the best a kernel of its structure reaches on this
host: the operands' loads, the caches and the clock take their share of
every kernel. These kernels are what a BLAS micro-kernel does, written
plainly: an `MR x NR` outer-product register tile (the target's
`micro_kernel.register_shapes`, the ones the search offers), the reduction
loop innermost with the accumulators in registers across it, the row tiles
outer and the column tiles inner, the rows left over by `MR` in a tile of
their own; compiled with `gcc -O3 -march=native`. Timed in the same rounds
as the tuned program, they answer whether the search's kernel falls short
of a hand-written one or the host's memory system stops both.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ansor_mlir.core.schedule import micro_kernel_shape
from ansor_mlir.errors import AnsorError

# One tile of `MR` rows and `NV` vectors of columns; C's vector extension lowers `s * b + acc` to FMAs
# (`-ffp-contract=fast`) at the host's vector width (`VBYTES`). `vfu` reads and writes unaligned rows.
_PRELUDE = r"""
typedef float vf __attribute__((vector_size(VBYTES)));
typedef float vfu __attribute__((vector_size(VBYTES), aligned(4)));
#define LANES (VBYTES / 4)
#define TILE(NAME, MR, NV)                                                                          \
static void NAME(const float *restrict a, const float *restrict b, float *restrict c) {                 \
    vf acc[MR][NV];                                                                                 \
    for (int r = 0; r < MR; ++r)                                                                    \
        for (int v = 0; v < NV; ++v) acc[r][v] = (vf){0};                                          \
    for (long p = 0; p < K; ++p) {                                                                  \
        vf bv[NV];                                                                                  \
        for (int v = 0; v < NV; ++v) bv[v] = *(const vfu *)(b + p * N + v * LANES);                \
        _Pragma("GCC unroll 16")                                                                    \
        for (int r = 0; r < MR; ++r) {                                                              \
            float s = a[r * K + p];                                                                 \
            _Pragma("GCC unroll 8")                                                                 \
            for (int v = 0; v < NV; ++v) acc[r][v] += s * bv[v];                                    \
        }                                                                                           \
    }                                                                                               \
    for (int r = 0; r < MR; ++r)                                                                    \
        for (int v = 0; v < NV; ++v) *(vfu *)(c + r * N + v * LANES) = acc[r][v];                   \
}
"""

_GEMM = r"""
TILE(tile_{mr}x{nv}, {mr}, {nv})
{tail_tile}
void gemm_{mr}x{nv}(const float *a, const float *b, float *c) {{
    for (long q = 0; q < BATCH; ++q) {{
        const float *aq = a + q * M * K, *bq = b + q * K * N;
        float *cq = c + q * M * N;
        long i = 0;
        for (; i + {mr} <= M; i += {mr})
            for (long j = 0; j < N; j += {nv} * LANES) tile_{mr}x{nv}(aq + i * K, bq + j, cq + i * N + j);
        {tail_loop}
    }}
}}
"""


PAGE = 4096
STAGGER = 1024 + 64  # bytes between consecutive operands' offsets modulo a page


@dataclass(frozen=True)
class MicroKernel:
    """One compiled kernel: its register tile and a zero-argument call on fixed operands."""

    shape: str  # "MRxNR"
    call: Callable[[], object]


def _source(shapes: list[tuple[int, int]], batch: int, m: int, n: int, k: int, lanes: int) -> str:
    """The kernels specialized to the matmul's static shape, as IREE specializes its dispatch."""
    parts = [f"#define BATCH {batch}L\n#define M {m}L\n#define N {n}L\n#define K {k}L", _PRELUDE]
    for mr, nr in shapes:
        nv, tail = nr // lanes, m % mr
        tail_tile = f"TILE(tail_{mr}x{nv}, {tail}, {nv})" if tail else ""
        tail_loop = (f"if (i < M) for (long j = 0; j < N; j += {nv} * LANES) "
                     f"tail_{mr}x{nv}(aq + i * K, bq + j, cq + i * N + j);") if tail else ""
        parts.append(_GEMM.format(mr=mr, nv=nv, tail_tile=tail_tile, tail_loop=tail_loop))
    return "\n".join(parts)


def _staggered(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Copies of `arrays` in one buffer, each 64-byte aligned at a different offset modulo 4 KiB (`STAGGER`).

    Where the operands sit decides how often a load of one aliases a store
    to another in the core's 4 KiB-granular disambiguation and which L1 sets
    their rows share: the same kernel on numpy's arrays ran from 22 to 28 us
    (GMM 128^3, 8x32) from one allocation to the next. A fixed, staggered
    placement makes the reference the same in every run.
    """
    sizes = [-(-x.nbytes // PAGE) * PAGE + PAGE for x in arrays]
    raw = np.zeros(sum(sizes) // 4 + PAGE // 4, np.float32)
    start = (-raw.ctypes.data % PAGE) // 4
    views = []
    for i, (x, size) in enumerate(zip(arrays, sizes, strict=True)):
        offset = start + (i * STAGGER) // 4
        view = raw[offset:offset + x.size].reshape(x.shape)
        view[...] = x
        views.append(view)
        start += size // 4
    return views


def matmul_kernels(workdir: Path, a: np.ndarray, b: np.ndarray, shapes: list[str], vector_bytes: int,
                   ) -> list[MicroKernel]:
    """Kernels computing `a @ b` (float32, `[batch, m, k] @ [batch, k, n]`) with each `MRxNR` register tile of
    `shapes` (`nr` a multiple of the vector's lanes dividing `n`), checked against numpy first; [] without a C
    compiler."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None or not shapes:
        return []
    batch, m, k = a.shape
    n = b.shape[2]
    a, b, out = _staggered([np.asarray(a, np.float32), np.asarray(b, np.float32), np.zeros((batch, m, n), np.float32)])
    lanes = vector_bytes // 4
    tiles = [micro_kernel_shape(s) for s in shapes]
    if any(nr % lanes or n % nr for _, nr in tiles):
        raise AnsorError(f"micro-kernel shapes {shapes}: each nr must be whole {lanes}-lane vectors dividing {n}")
    src, lib = workdir / "microkernels.c", workdir / "microkernels.so"
    src.write_text(_source(tiles, batch, m, n, k, lanes))
    cmd = [gcc, "-O3", "-march=native", "-ffp-contract=fast", "-shared", "-fPIC", f"-DVBYTES={vector_bytes}",
           str(src), "-o", str(lib)]
    built = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if built.returncode != 0:
        raise AnsorError(f"the C micro-kernels did not compile: {built.stderr.strip().splitlines()[-1]}")
    dll = ctypes.CDLL(str(lib))
    expected = np.matmul(a.astype(np.float64), b.astype(np.float64))
    pointers = [x.ctypes.data_as(ctypes.c_void_p) for x in (a, b, out)]
    kernels = []
    for (mr, nr), shape in zip(tiles, shapes, strict=True):
        fn = getattr(dll, f"gemm_{mr}x{nr // lanes}")
        fn.argtypes = [ctypes.c_void_p] * 3
        fn.restype = None
        out.fill(0.0)
        fn(*pointers)
        error = float(np.abs(out - expected).max())
        if error > 1e-3 * max(1.0, float(np.abs(expected).max())):
            raise AnsorError(f"the C micro-kernel {shape} computes a wrong matmul (max error {error:.3g})")
        # The call holds the arrays: the pointers alone would not keep them alive.
        kernels.append(MicroKernel(shape, (lambda f=fn, held=(a, b, out): f(*pointers))))
    return kernels

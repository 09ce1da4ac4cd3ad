"""The physical limit of this machine, one thread: peak f32 FLOP/s and memory bandwidth.

Every contender is timed on one runtime thread, so the roofline is measured
on one thread too. Peak comes from a tiny C kernel of independent FMA chains
(enough chains to hide the FMA latency, so it is throughput-bound), compiled
with `gcc -O3 -march=native`; bandwidth from a STREAM-style triad over arrays
much larger than the last-level cache. Without a C compiler both fall back
to numpy (a large single-thread SGEMM and a large copy): lower bounds on the
true limits, and the report says which method gave each number.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

# Independent FMA chains: enough to cover FMA latency x pipes (4 x 2 on current x86 cores), few enough that they
# and the two operands stay in registers. 16 chains spilled on AVX2's 16 ymm registers and measured 56 GFLOP/s on a
# Zen 3 core where OpenBLAS ran SGEMM at 87.
MAX_FMA_CHAINS = 16
OPERAND_REGISTERS = 4


def fma_chains(vector_bytes: int) -> int:
    """Chains for `vector_bytes`-wide vectors: x86 has 32 registers with AVX-512, 16 below it."""
    registers = 32 if vector_bytes >= 64 else 16
    return min(MAX_FMA_CHAINS, registers - OPERAND_REGISTERS)
FMA_KERNEL = r"""
typedef float vf __attribute__((vector_size(VBYTES)));
float fma_peak(long iters) {
    vf acc[CHAINS];
    vf a, b;
    for (int i = 0; i < (int)(VBYTES / 4); ++i) { a[i] = 0.999999f; b[i] = 1e-7f; }
    for (int c = 0; c < CHAINS; ++c) acc[c] = a * (float)(c + 1);
    for (long n = 0; n < iters; ++n) {
        #pragma GCC unroll 16
        for (int c = 0; c < CHAINS; ++c) acc[c] = acc[c] * a + b;
        __asm__ volatile("" : "+v"(a), "+v"(b));  // both in registers: no memory operand
    }
    float s = 0.0f;
    for (int c = 0; c < CHAINS; ++c) for (int i = 0; i < (int)(VBYTES / 4); ++i) s += acc[c][i];
    return s;
}
void triad(float *restrict a, const float *restrict b, const float *restrict c, long n, float s) {
    for (long i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}
"""


@dataclass(frozen=True)
class Roofline:
    """Peak compute and bandwidth of one thread, and how each was measured."""

    peak_flops: float
    bandwidth_bytes_s: float
    peak_method: str
    bandwidth_method: str
    cache_bandwidths: tuple[tuple[int, float], ...] = ()

    def bandwidth_for(self, working_set: float) -> float:
        """Bandwidth of the smallest measured cache level the working set fits in, else memory's.

        The suite's small ops are timed warm, with their data cache-resident: memory
        bandwidth would be no bound for them at all (measured "% of roofline" above 100%).
        """
        fitting = [bw for capacity, bw in sorted(self.cache_bandwidths) if working_set <= capacity]
        return fitting[0] if fitting else self.bandwidth_bytes_s

    def bound_s(self, flops: float, min_bytes: float) -> float:
        """Fastest time any program could take: compute-bound or memory-bound, whichever is slower."""
        return max(flops / self.peak_flops, min_bytes / self.bandwidth_for(min_bytes))

    def fraction(self, flops: float, min_bytes: float, seconds: float) -> float:
        """Share of the roofline bound a measured time reaches (1.0 = at the physical limit)."""
        return self.bound_s(flops, min_bytes) / seconds

    def to_dict(self) -> dict:
        return asdict(self)

    def scaled(self, threads: int) -> Roofline:
        """The limit of `threads` cores: one core's peak times `threads`; bandwidth stays one core's (a lower
        bound: one core rarely saturates memory)."""
        if threads <= 1:
            return self
        return replace(self, peak_flops=self.peak_flops * threads,
                       peak_method=f"{threads} x one core's: {self.peak_method}",
                       bandwidth_method=f"one core's (a lower bound for {threads}): {self.bandwidth_method}")

    def best_with(self, other: Roofline) -> Roofline:
        """Both measurements combined: limits are maxima, so load on a shared machine only lowers them."""
        levels = dict(self.cache_bandwidths)
        for capacity, bw in other.cache_bandwidths:
            levels[capacity] = max(bw, levels.get(capacity, 0.0))
        peak = self if self.peak_flops >= other.peak_flops else other
        memory = self if self.bandwidth_bytes_s >= other.bandwidth_bytes_s else other
        return Roofline(peak.peak_flops, memory.bandwidth_bytes_s, peak.peak_method, memory.bandwidth_method,
                        tuple(sorted(levels.items())))


def _vector_bytes() -> int:
    try:
        flags = Path("/proc/cpuinfo").read_text().split("flags", 2)[1].split("\n", 1)[0].split()
    except (OSError, IndexError):
        return 16
    return 64 if "avx512f" in flags else 32 if "avx2" in flags else 16


def _best_of(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _compile_kernel(workdir: Path, vector_bytes: int) -> ctypes.CDLL | None:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        return None
    src, lib = workdir / "roofline.c", workdir / "roofline.so"
    src.write_text(FMA_KERNEL)
    cmd = [gcc, "-O3", "-march=native", "-ffp-contract=fast", "-shared", "-fPIC",
           f"-DVBYTES={vector_bytes}", f"-DCHAINS={fma_chains(vector_bytes)}", str(src), "-o", str(lib)]
    if subprocess.run(cmd, capture_output=True, check=False).returncode != 0:
        return None
    dll = ctypes.CDLL(str(lib))
    dll.fma_peak.argtypes, dll.fma_peak.restype = [ctypes.c_long], ctypes.c_float
    dll.triad.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_float]
    dll.triad.restype = None
    return dll


# The peak kernel's work per call when it is timed beside programs (about 1 ms): long enough that the ctypes call
# costs nothing measurable (at a 128^3 matmul's 4 MFLOP it read the peak 2% low), short enough for dozens of calls in
# each round.
PEAK_CALL_FLOPS = 2.0**28


@dataclass(frozen=True)
class PeakCall:
    """A call of the peak's FMA kernel doing `flops` FLOPs, to time beside a program: its median over the same
    alternated rounds is the peak in the program's conditions (the host's clock and load), not in the best moment
    of a separate measurement."""

    call: object  # zero-argument callable
    flops: float
    method: str


def peak_call(workdir: Path, flops: float) -> PeakCall | None:
    """The FMA kernel (`measure_roofline`'s) as a call of about `flops` FLOPs; None without a C compiler."""
    vector_bytes = _vector_bytes()
    workdir.mkdir(parents=True, exist_ok=True)
    dll = _compile_kernel(workdir, vector_bytes)
    if dll is None:
        return None
    per_iter = _flops_per_iteration(vector_bytes)
    iters = max(1, round(flops / per_iter))
    return PeakCall(lambda: dll.fma_peak(iters), float(per_iter * iters), _peak_method(vector_bytes))


def _flops_per_iteration(vector_bytes: int) -> int:
    """FLOPs of one iteration of `fma_peak`: an FMA (2 FLOPs a lane) on every chain."""
    return 2 * fma_chains(vector_bytes) * (vector_bytes // 4)


def _peak_method(vector_bytes: int) -> str:
    return (f"C kernel, {fma_chains(vector_bytes)} independent {vector_bytes * 8}-bit FMA chains "
            "(gcc -O3 -march=native)")


def _stream_elements(last_level_cache: int) -> int:
    """Triad arrays of 4x the last-level cache (STREAM's rule), capped at 256 MiB each."""
    return min(max(4 * last_level_cache, 64 << 20), 256 << 20) // 4


def _cache_bandwidths(dll: ctypes.CDLL, capacities: list[int], repeats: int) -> tuple[tuple[int, float], ...]:
    """Triad bandwidth with the three arrays filling half of each cache level, warm."""
    levels = []
    for capacity in capacities:
        n = max(1024, capacity // 2 // 12)
        arrays = [np.full(n, 1.0, dtype=np.float32) for _ in range(3)]
        ptrs = [x.ctypes.data for x in arrays]
        reps = max(1, (64 << 20) // (12 * n))
        seconds = _best_of(lambda ptrs=ptrs, n=n, reps=reps: [dll.triad(*ptrs, n, 3.0) for _ in range(reps)],
                           repeats)
        levels.append((capacity, 12 * n * reps / seconds))
    return tuple(levels)


def measure_roofline(last_level_cache: int = 32 << 20, quick: bool = False,
                     caches: tuple[int, ...] = ()) -> Roofline:
    """Measure peak FMA FLOP/s, memory triad bandwidth and (given their sizes) cache triad bandwidths.

    Best of many short runs: on a shared machine the fastest run is the one least
    disturbed by other processes, and the peak is a maximum by definition.
    """
    repeats = 3 if quick else 25
    vector_bytes = _vector_bytes()
    n = _stream_elements(last_level_cache) // (4 if quick else 1)
    a, b, c = (np.full(n, 1.0, dtype=np.float32) for _ in range(3))
    with tempfile.TemporaryDirectory(prefix="ansor_roofline_") as tmp:
        dll = _compile_kernel(Path(tmp), vector_bytes)
        if dll is not None:
            iters = 2_000_000 if quick else 4_000_000
            seconds = _best_of(lambda: dll.fma_peak(iters), repeats)
            peak = _flops_per_iteration(vector_bytes) * iters / seconds
            peak_method = _peak_method(vector_bytes)
            ptrs = [x.ctypes.data for x in (a, b, c)]
            seconds = _best_of(lambda: dll.triad(*ptrs, n, 3.0), repeats)
            bandwidth = 3 * 4 * n / seconds
            bw_method = f"C STREAM triad a=b+s*c, 3 x {4 * n >> 20} MiB arrays (gcc -O3 -march=native)"
            levels = _cache_bandwidths(dll, list(caches), repeats)
            if levels:
                bw_method += "; cache-resident triads at " + ", ".join(
                    f"{cap >> 10} KiB: {bw / 1e9:.0f} GB/s" for cap, bw in levels)
            return Roofline(peak, bandwidth, peak_method, bw_method, levels)
    size = 1024 if quick else 2048
    x = np.ones((size, size), dtype=np.float32)
    seconds = _best_of(lambda: x @ x, repeats)
    peak = 2.0 * size**3 / seconds
    seconds = _best_of(lambda: np.copyto(a, b), repeats)
    bandwidth = 2 * 4 * n / seconds
    return Roofline(peak, bandwidth, f"numpy {size}^3 SGEMM (no C compiler; a lower bound)",
                    f"numpy copy of {4 * n >> 20} MiB (no C compiler; a lower bound)")


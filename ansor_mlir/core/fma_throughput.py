"""Documented f32 FMA throughput of named CPUs, as data: the check a measured peak must pass.

A benchmark's "% of peak" is only as good as its peak. A peak measured by a
kernel is checked against what the vendor documents: FLOPs per cycle per core
(FMA pipes x f32 lanes per pipe x 2) times the clock. Keys are LLVM CPU
names, what IREE resolves `cpu=host` to. Sources: Intel's and AMD's
optimization reference manuals, Arm's software optimization guides, and
Agner Fog's instruction tables. Adding a CPU is adding a value.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FmaThroughput:
    """FMA issue of one core: `pipes` FMAs of `pipe_bits` each per cycle."""

    pipes: int
    pipe_bits: int
    note: str = ""

    @property
    def f32_flops_per_cycle(self) -> int:
        return self.pipes * (self.pipe_bits // 32) * 2

    def describe(self) -> str:
        return f"{self.pipes} x {self.pipe_bits}-bit FMA per cycle{f' ({self.note})' if self.note else ''}"


_AVX2 = FmaThroughput(2, 256)
_AVX512_TWO_UNITS = FmaThroughput(2, 512, "Xeon Gold/Platinum; 1-unit SKUs reach half")
_AVX512_ONE_UNIT = FmaThroughput(1, 512, "client parts: one 512-bit FMA unit")

CPU_FMA: dict[str, FmaThroughput] = {
    "haswell": _AVX2, "broadwell": _AVX2, "skylake": _AVX2, "alderlake": _AVX2, "raptorlake": _AVX2,
    "skylake-avx512": _AVX512_TWO_UNITS, "cascadelake": _AVX512_TWO_UNITS, "cooperlake": _AVX512_TWO_UNITS,
    "icelake-server": _AVX512_TWO_UNITS, "sapphirerapids": _AVX512_TWO_UNITS,
    "emeraldrapids": _AVX512_TWO_UNITS, "graniterapids": _AVX512_TWO_UNITS,
    "icelake-client": _AVX512_ONE_UNIT, "tigerlake": _AVX512_ONE_UNIT, "rocketlake": _AVX512_ONE_UNIT,
    "znver1": FmaThroughput(2, 128),
    "znver2": _AVX2, "znver3": _AVX2,
    "znver4": FmaThroughput(2, 256, "a 512-bit FMA issues as two 256-bit halves"),
    "znver5": FmaThroughput(2, 512, "desktop and server parts; mobile parts issue 512-bit as two halves"),
    "neoverse-n1": FmaThroughput(2, 128), "neoverse-n2": FmaThroughput(2, 128),
    "neoverse-v1": FmaThroughput(4, 128, "NEON; or 2 x 256-bit SVE"), "neoverse-v2": FmaThroughput(4, 128),
    "apple-m1": FmaThroughput(4, 128),
}


# Features only server parts have, and the FMA issue they imply. A hypervisor may report a CPU model number that
# LLVM names as a client part: a KVM guest on a Xeon with AMX resolved to `rocketlake` (one 512-bit FMA unit)
# while its features included amx-tile and amx-fp16 (Granite Rapids).
SERVER_FEATURES: dict[str, FmaThroughput] = {
    "amx-tile": FmaThroughput(2, 512, "a Xeon with AMX (Sapphire Rapids or later), whatever model it reports"),
}


def fma_throughput(cpu: str, features: tuple[str, ...] = ()) -> FmaThroughput | None:
    """The documented FMA issue of an LLVM CPU name with its features, None for one not in the table."""
    implied = [fma for feature, fma in SERVER_FEATURES.items() if feature in features]
    named = CPU_FMA.get(cpu)
    candidates = [fma for fma in (named, *implied) if fma is not None]
    return max(candidates, key=lambda fma: fma.f32_flops_per_cycle, default=None)


def reported_clock_hz(cpuinfo: Path = Path("/proc/cpuinfo"),
                      cpufreq: Path = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")) -> float | None:
    """The highest clock the OS states for core 0: cpufreq's maximum, else /proc/cpuinfo's `cpu MHz`.

    A virtual machine usually states only its base clock, which a boosting core exceeds.
    """
    try:
        return float(cpufreq.read_text().strip()) * 1e3
    except (OSError, ValueError):
        pass
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("cpu MHz"):
                return float(line.split(":", 1)[1]) * 1e6
    except (OSError, ValueError):
        pass
    return None


def peak_check(cpu: str, measured_flops: float, clock_hz: float | None, features: tuple[str, ...] = ()) -> str:
    """One sentence setting a measured one-core peak against the documented FMA throughput times the clock."""
    fma = fma_throughput(cpu, features)
    if fma is None:
        return f"no documented FMA throughput for `{cpu}`: the measured peak is unchecked"
    per_cycle = fma.f32_flops_per_cycle
    implied_ghz = measured_flops / per_cycle / 1e9
    whose = f"`{cpu}` documents" if fma == CPU_FMA.get(cpu) else f"`{cpu}`, by its features, documents"
    text = (f"{whose} {fma.describe()} = {per_cycle} f32 FLOP/cycle per core; the measured peak "
            f"implies a clock of {implied_ghz:.2f} GHz")
    if clock_hz:
        documented = per_cycle * clock_hz
        text += (f"; at the {clock_hz / 1e9:.2f} GHz the OS reports, the documented peak is "
                 f"{documented / 1e9:.1f} GFLOP/s (measured / documented = {measured_flops / documented:.2f}; "
                 "above 1 means the core boosts past the reported clock)")
    return text

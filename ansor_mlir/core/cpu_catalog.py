"""Named CPUs of other architectures, as data: what the rules consult about a machine that is not this one.

A host target reads its cores and caches off this machine; a cross target
(`aarch64:neoverse-v1`) cannot, so each named CPU carries them here. Its
vector width is only the starting point: IREE decides what it vectorizes for
(`frontend.target_resolution` reads `native_vector_size` off IREE's
executable target), and for every AArch64 CPU below IREE 3.13 resolves 16
bytes (NEON, 4 f32 lanes), SVE CPUs included: SVE is used only by IREE's
opt-in scalable vectorization, whose vector length is a run-time multiple
(`vscale`) the fixed-width sketches do not model. `sve_bits` records the
hardware's SVE width for reports. Adding a CPU is adding a value.
"""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024
MIB = 1024 * 1024


@dataclass(frozen=True)
class Architecture:
    """An instruction set the tuner cross-compiles for: its LLVM triple and how its programs run on this host."""

    name: str
    triple: str
    # `platform.machine()` of a host that runs its programs natively.
    machine: str
    # User-mode emulator that runs its programs elsewhere (correctness only, never timing), and the directory
    # holding the architecture's C runtime for it (`qemu -L`; Debian's cross packages install it there).
    emulator: str
    sysroot: str


@dataclass(frozen=True)
class CpuDescription:
    """One CPU: what IREE is told (`cpu`, the architecture's triple) and the machine facts the rules read."""

    arch: str
    cpu: str
    cores: int
    vector_bytes: int
    l1_bytes: int
    l2_bytes: int
    l3_bytes: int
    sve_bits: int = 0
    # A machine that has it, for reports (cores and caches are that machine's).
    example: str = ""


ARCHITECTURES: dict[str, Architecture] = {
    "aarch64": Architecture("aarch64", "aarch64-unknown-linux-gnu", "aarch64", "qemu-aarch64-static",
                            "/usr/aarch64-linux-gnu"),
}

# Per-core L1D and L2, shared L3, core counts of the example machine (Arm's TRMs and the vendors' data sheets).
CPUS: tuple[CpuDescription, ...] = (
    CpuDescription("aarch64", "neoverse-v1", 64, 16, 64 * KIB, 1 * MIB, 32 * MIB, sve_bits=256,
                   example="AWS Graviton3"),
    CpuDescription("aarch64", "neoverse-n1", 64, 16, 64 * KIB, 1 * MIB, 32 * MIB, example="AWS Graviton2"),
    CpuDescription("aarch64", "neoverse-v2", 72, 16, 64 * KIB, 1 * MIB, 114 * MIB, sve_bits=128,
                   example="NVIDIA Grace"),
    CpuDescription("aarch64", "cortex-a76", 4, 16, 64 * KIB, 512 * KIB, 2 * MIB, example="Raspberry Pi 5"),
)


def named_cpu(arch: str, cpu: str) -> CpuDescription | None:
    return next((c for c in CPUS if c.arch == arch and c.cpu == cpu), None)


def cross_target_names() -> tuple[str, ...]:
    """`ARCH:CPU` for every named CPU, as targets are written on the command line."""
    return tuple(f"{c.arch}:{c.cpu}" for c in CPUS)

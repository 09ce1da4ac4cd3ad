"""Targets as data: what the sketch rules and the measurer need to know.

Rules consult these fields instead of testing target names, so a new target
(aarch64, CUDA) is a new `Target` value, not new branches in the search.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace

from ansor_mlir.core.cpu_catalog import ARCHITECTURES, cross_target_names, named_cpu
from ansor_mlir.core.gpu_target import BACKEND as CUDA_BACKEND
from ansor_mlir.core.gpu_target import GpuSpec, parse_gpu, target_names
from ansor_mlir.errors import AnsorError

KNOWN_BACKENDS = ("llvm-cpu",)
# IREE's defaults: `max_stack_allocation_size`, and the vector size limit in native vectors
# (`--iree-llvmcpu-max-allowed-number-of-native-vectors`), past which a dispatch is rejected.
IREE_STACK_LIMIT_BYTES = 32 * 1024
IREE_MAX_NATIVE_VECTORS = 512
# LLVM features that give 32 vector registers (zmm0-31, v0-31); x86 without AVX-512 has 16.
WIDE_REGISTER_FILE_FEATURES = frozenset({"avx512f", "neon", "sve"})


# ansor-mlir's own codegen choice for every CPU program it builds: IREE's default build (`-O0` for this flag) ends
# each vectorized floating-point reduction in ordered scalar adds, which no tuned tile size removes (a softmax's
# reductions, `docs/concepts/program_rewrites.md`); reassociated, they end in vector adds, as PyTorch's kernels and
# IREE's `-O2` do. `Target.iree_default_flags` leaves it out: the build a benchmark calls IREE's default.
REASSOCIATE_FP_REDUCTIONS_FLAG = "--iree-llvmcpu-reassociate-fp-reductions=true"

# Programs for threads > 1 take IREE's wait and signal fences and return once their work is queued, so the caller
# can wait without holding a core the task workers need (`mlir.vm_invoke`, `docs/reports/caller_wait.md`).
ASYNC_EXECUTION_FLAG = "--iree-execution-model=async-external"


@dataclass(frozen=True)
class ResolvedCpu:
    """What IREE resolves a `cpu=` name to (`--iree-llvmcpu-target-cpu`), read off its executable target."""

    cpu: str
    features: tuple[str, ...]
    triple: str
    vector_bytes: int
    stack_limit_bytes: int


def enabled_features(spec: str | Iterable[str]) -> tuple[str, ...]:
    """The enabled LLVM features of `+a,+b,-c` (a later entry overrides an earlier one), sorted, unsigned."""
    entries = spec.split(",") if isinstance(spec, str) else spec
    state: dict[str, bool] = {}
    for entry in (e.strip() for e in entries):
        if entry[:1] in "+-" and entry[1:]:
            state[entry[1:]] = entry[0] == "+"
    return tuple(sorted(name for name, on in state.items() if on))


@dataclass(frozen=True)
class Target:
    """A compilation target and the machine facts the search uses."""

    backend: str = "llvm-cpu"
    cpu: str = "host"
    triple: str = ""
    cores: int = 1
    vector_bytes: int = 32
    l1_bytes: int = 32 * 1024
    l2_bytes: int = 1024 * 1024
    l3_bytes: int = 8 * 1024 * 1024
    threads: int = 1
    extra_flags: tuple[str, ...] = field(default_factory=tuple)
    # What IREE resolved `cpu` to (`frontend.target_resolution`); empty until resolved.
    resolved_cpu: str = ""
    cpu_features: tuple[str, ...] = field(default_factory=tuple)
    stack_limit_bytes: int = IREE_STACK_LIMIT_BYTES
    # The widest block LLVM transposes with in-lane shuffles alone: x86's `unpck`/`shufps` and AArch64's
    # `zip`/`trn` work within 128-bit lanes. Wider blocks take index-vector permutes and spill (`Pack.block`).
    shuffle_lane_bytes: int = 16
    # A CUDA target's device (`backend="cuda"`); None for CPUs.
    gpu: GpuSpec | None = None

    @property
    def key(self) -> str:
        """Identity of the target for records: a record never crosses targets."""
        if self.gpu is not None:
            return f"{self.backend}:{self.gpu.arch}"
        parts = [self.backend, self.cpu]
        if self.triple:
            parts.append(self.triple)
        parts.append(f"t{self.threads}")
        return ":".join(parts)

    @property
    def fingerprint(self) -> str:
        """The machine a record was made for: backend, resolved CPU, a digest of its features, threads.

        `key` names the request (`llvm-cpu:host:t1`); two hosts answer it
        differently, the fingerprint tells them apart.
        """
        digest = hashlib.sha256(",".join(self.cpu_features).encode()).hexdigest()[:12]
        return ":".join([self.backend, self.resolved_cpu or self.cpu, digest, f"t{self.threads}"])

    @property
    def arch(self) -> str:
        """The instruction set programs are built for: the triple's, this machine's without one."""
        return self.triple.split("-", 1)[0] if self.triple else platform.machine()

    @property
    def runs_here(self) -> bool:
        """Whether this machine runs (and can time) its programs natively."""
        return self.arch == platform.machine()

    @property
    def vector_limit_bytes(self) -> int:
        """IREE rejects a dispatch whose vectors are larger ("large vector sizes"): 512 native vectors."""
        return self.vector_bytes * IREE_MAX_NATIVE_VECTORS

    @property
    def vector_registers(self) -> int:
        """Architectural vector registers: 32 with AVX-512 (zmm) or on AArch64, 16 ymm/xmm otherwise.

        Without resolved features, a 64-byte vector implies AVX-512.
        """
        if self.cpu_features:
            return 32 if WIDE_REGISTER_FILE_FEATURES & set(self.cpu_features) else 16
        return 32 if self.vector_bytes >= 64 else 16

    def resolved(self, cpu: ResolvedCpu) -> Target:
        """This target with what IREE resolved its CPU to: name, features, vector width, stack limit."""
        return replace(
            self,
            resolved_cpu=cpu.cpu,
            cpu_features=cpu.features,
            vector_bytes=cpu.vector_bytes,
            stack_limit_bytes=cpu.stack_limit_bytes,
        )

    def vector_lanes(self, element_bytes: int) -> int:
        return max(1, self.vector_bytes // element_bytes)

    def pad_row_elements(self, element_bytes: int) -> int:
        """Elements one row of a fused input pad's copy may hold (`PadRows`): half the vector registers' worth,
        so a row loaded whole leaves the other half free."""
        return self.vector_registers // 2 * self.vector_lanes(element_bytes)

    def transpose_block(self, element_bytes: int) -> int:
        """Elements per side of the square blocks a packed operand's transpose is cut into."""
        return max(1, self.shuffle_lane_bytes // element_bytes)

    def compile_flags(self) -> list[str]:
        """Flags for iree-compile that select this target, with ansor-mlir's codegen choices (`codegen_flags`):
        every program ansor-mlir builds, its candidates' and its own IREE-default builds included."""
        return self.iree_default_flags() + self.codegen_flags()

    def iree_default_flags(self) -> list[str]:
        """Flags that select this target and nothing else: IREE's own default build of a program for it."""
        if self.gpu is not None:
            return self.gpu.compile_flags() + list(self.extra_flags)
        flags = [
            "--iree-hal-target-device=local",
            f"--iree-hal-local-target-device-backends={self.backend}",
            f"--iree-llvmcpu-target-cpu={self.cpu}",
        ]
        if self.triple:
            flags.append(f"--iree-llvmcpu-target-triple={self.triple}")
        if self.threads > 1:
            flags.append(ASYNC_EXECUTION_FLAG)  # the caller waits with a yielding poll (`mlir.vm_invoke`)
        return flags + list(self.extra_flags)

    def codegen_flags(self) -> list[str]:
        """ansor-mlir's codegen choices beyond the target's selection; a flow-level module (which carries its
        target) is built with these alone."""
        return [] if self.gpu is not None else [REASSOCIATE_FP_REDUCTIONS_FLAG]

    def runtime_device(self) -> str:
        """The IREE runtime device used for timing (one thread = stable timing)."""
        if self.gpu is not None:
            return self.backend
        return "local-sync" if self.threads <= 1 else "local-task"

    def runtime_flags(self) -> tuple[str, ...]:
        """IREE runtime flags for a process that times on `runtime_device`, parsed before its first device.

        `local-task` otherwise starts one worker per physical core (up to 64),
        whatever `threads` says; capped, it starts `threads` workers, each
        pinned to its own physical core (fewer on a host with fewer cores).
        """
        return () if self.threads <= 1 else (f"--task_topology_max_group_count={self.threads}",)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def _cpuinfo_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _cache_bytes(level: int, kind: str = "") -> int | None:
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(base)):
            path = os.path.join(base, entry)
            with open(os.path.join(path, "level"), encoding="utf-8") as f:
                if int(f.read()) != level:
                    continue
            with open(os.path.join(path, "type"), encoding="utf-8") as f:
                ctype = f.read().strip()
            if ctype == "Instruction" or (kind and ctype != kind):
                continue
            with open(os.path.join(path, "size"), encoding="utf-8") as f:
                text = f.read().strip()
            match = re.fullmatch(r"(\d+)([KMG]?)", text)
            if match:
                scale = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[match.group(2)]
                return int(match.group(1)) * scale
    except OSError:
        return None
    return None


def detect_host(threads: int = 1, cpu: str = "host", triple: str = "") -> Target:
    """Describe the machine we run on: cores, vector width, caches."""
    flags = _cpuinfo_flags()
    if "avx512f" in flags:
        vector_bytes = 64
    elif "avx2" in flags or "avx" in flags:
        vector_bytes = 32
    else:
        vector_bytes = 16
    return Target(
        backend="llvm-cpu",
        cpu=cpu,
        triple=triple,
        cores=os.cpu_count() or 1,
        vector_bytes=vector_bytes,
        l1_bytes=_cache_bytes(1, "Data") or 32 * 1024,
        l2_bytes=_cache_bytes(2) or 1024 * 1024,
        l3_bytes=_cache_bytes(3) or 8 * 1024 * 1024,
        threads=threads,
    )


def known_targets() -> tuple[str, ...]:
    """Every target string `parse_target` accepts."""
    return (*KNOWN_BACKENDS, *cross_target_names(), *target_names())


def parse_target(name: str, threads: int = 1, cpu: str = "host", triple: str = "") -> Target:
    """Resolve a user-given target name (`llvm-cpu`, `cuda`, `cuda:sm_80`), with a clear error for unknown ones."""
    if name.partition(":")[0] == CUDA_BACKEND:
        gpu = parse_gpu(name)
        return Target(backend=CUDA_BACKEND, cpu=gpu.arch, cores=gpu.sm_count, vector_bytes=gpu.load_bytes, gpu=gpu)
    arch, sep, cpu_name = name.partition(":")
    if sep and arch in ARCHITECTURES:
        return cross_target(arch, cpu_name, threads, cpu)
    if name not in KNOWN_BACKENDS:
        raise AnsorError(
            f"unknown target '{name}': supported targets are {', '.join(known_targets())}"
        )
    if threads < 1:
        raise AnsorError(f"threads must be >= 1, got {threads}")
    return detect_host(threads=threads, cpu=cpu, triple=triple)


def cross_target(arch: str, cpu: str, threads: int = 1, cpu_option: str = "host") -> Target:
    """A named CPU of another architecture (`aarch64:neoverse-v1`): its triple, cores and caches from
    `core.cpu_catalog`; what IREE vectorizes for is resolved later, like any CPU's."""
    described = named_cpu(arch, cpu)
    if described is None:
        raise AnsorError(f"unknown target '{arch}:{cpu}': named {arch} CPUs are "
                         f"{', '.join(n for n in cross_target_names() if n.startswith(arch + ':'))} "
                         "(add one to ansor_mlir/core/cpu_catalog.py)")
    if threads < 1:
        raise AnsorError(f"threads must be >= 1, got {threads}")
    if cpu_option not in ("host", cpu):
        raise AnsorError(f"target {arch}:{cpu} names its CPU: drop cpu={cpu_option}")
    return Target(backend="llvm-cpu", cpu=cpu, triple=ARCHITECTURES[arch].triple, cores=described.cores,
                  vector_bytes=described.vector_bytes, l1_bytes=described.l1_bytes, l2_bytes=described.l2_bytes,
                  l3_bytes=described.l3_bytes, threads=threads)

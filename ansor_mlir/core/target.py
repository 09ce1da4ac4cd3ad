"""Targets as data: what the sketch rules and the measurer need to know.

Rules consult these fields instead of testing target names, so a new target
(aarch64, CUDA) is a new `Target` value, not new branches in the search.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field

from ansor_mlir.errors import AnsorError

KNOWN_BACKENDS = ("llvm-cpu",)


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

    @property
    def key(self) -> str:
        """Identity of the target for records: a record never crosses targets."""
        parts = [self.backend, self.cpu]
        if self.triple:
            parts.append(self.triple)
        parts.append(f"t{self.threads}")
        return ":".join(parts)

    def vector_lanes(self, element_bytes: int) -> int:
        return max(1, self.vector_bytes // element_bytes)

    def compile_flags(self) -> list[str]:
        """Flags for iree-compile that select this target."""
        flags = [
            "--iree-hal-target-device=local",
            f"--iree-hal-local-target-device-backends={self.backend}",
            f"--iree-llvmcpu-target-cpu={self.cpu}",
        ]
        if self.triple:
            flags.append(f"--iree-llvmcpu-target-triple={self.triple}")
        return flags + list(self.extra_flags)

    def runtime_device(self) -> str:
        """The IREE runtime device used for timing (one thread = stable timing)."""
        return "local-sync" if self.threads <= 1 else "local-task"

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


def parse_target(name: str, threads: int = 1, cpu: str = "host", triple: str = "") -> Target:
    """Resolve a user-given target name, with a clear error for unknown ones."""
    if name not in KNOWN_BACKENDS:
        raise AnsorError(
            f"unknown target '{name}': supported targets are {', '.join(KNOWN_BACKENDS)}"
        )
    if threads < 1:
        raise AnsorError(f"threads must be >= 1, got {threads}")
    return detect_host(threads=threads, cpu=cpu, triple=triple)

"""CUDA targets as data: what GPU sketch rules and validity checks need to know of a device.

Launch limits, shared memory and tensor-core shapes are what IREE's own
`#iree_gpu.target` says of the architecture (read back by
`frontend.target_resolution`, so codegen and search agree); the SM count is
not in IREE's target and comes from the representative device of each
architecture in `KNOWN_GPUS`. A new architecture is a new entry here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from ansor_mlir.errors import AnsorError

BACKEND = "cuda"
DEFAULT_ARCH = "sm_80"


@dataclass(frozen=True)
class MmaShape:
    """One tensor-core instruction IREE can emit: its name (`iree_gpu.MMAIntrinsic`), shape and element types."""

    name: str
    m: int
    n: int
    k: int
    a_type: str
    b_type: str
    c_type: str

    @staticmethod
    def from_dict(data: dict) -> MmaShape:
        return MmaShape(str(data["name"]), int(data["m"]), int(data["n"]), int(data["k"]), str(data["a_type"]),
                        str(data["b_type"]), str(data["c_type"]))


@dataclass(frozen=True)
class GpuSpec:
    """A CUDA device as the search sees it."""

    arch: str
    device: str
    sm_count: int
    # Per block (IREE's `max_workgroup_memory_bytes`, `max_thread_count_per_workgroup`, `max_workgroup_sizes`).
    shared_memory_bytes: int
    max_threads: int
    max_block_dims: tuple[int, ...]
    warp_size: int
    mma_shapes: tuple[MmaShape, ...] = field(default_factory=tuple)
    # The widest global load one thread issues (`ld.global.v4.b32`): a thread's vector.
    load_bytes: int = 16
    # Registers one thread may hold before the compiler spills (255 32-bit registers on every sm_XX).
    registers_per_thread: int = 255

    def compile_flags(self) -> list[str]:
        return ["--iree-hal-target-device=cuda", f"--iree-cuda-target={self.arch}"]

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(data: dict) -> GpuSpec:
        return GpuSpec(str(data["arch"]), str(data["device"]), int(data["sm_count"]), int(data["shared_memory_bytes"]),
                       int(data["max_threads"]), tuple(int(d) for d in data["max_block_dims"]),
                       int(data["warp_size"]), tuple(MmaShape.from_dict(m) for m in data.get("mma_shapes", ())),
                       int(data.get("load_bytes", 16)), int(data.get("registers_per_thread", 255)))

    def with_limits(self, shared_memory_bytes: int, max_threads: int, max_block_dims: tuple[int, ...],
                    warp_size: int, mma_shapes: tuple[MmaShape, ...]) -> GpuSpec:
        """This device with the limits IREE's target for its architecture states."""
        return replace(self, shared_memory_bytes=shared_memory_bytes, max_threads=max_threads,
                       max_block_dims=max_block_dims, warp_size=warp_size, mma_shapes=mma_shapes)


def _spec(arch: str, device: str, sm_count: int, shared_kib: int) -> GpuSpec:
    """An architecture before IREE's target is read: the CUDA limits every sm_8x shares, no tensor cores known."""
    return GpuSpec(arch, device, sm_count, shared_kib * 1024, 1024, (1024, 1024, 64), 32)


# Architectures IREE 3.13 can target (sm_90 is not one: its PTX for sm_80/86/89 runs on H100 through the driver's
# JIT); SM counts and per-block shared memory of a representative device.
KNOWN_GPUS: dict[str, GpuSpec] = {
    "sm_80": _spec("sm_80", "A100", 108, 163),
    "sm_86": _spec("sm_86", "RTX 3090", 82, 99),
    "sm_89": _spec("sm_89", "RTX 4090", 128, 99),
}


def target_names() -> tuple[str, ...]:
    """The CUDA target strings users may give: `cuda` (sm_80) and `cuda:ARCH`."""
    return (BACKEND, *(f"{BACKEND}:{arch}" for arch in KNOWN_GPUS))


def parse_gpu(name: str) -> GpuSpec:
    """The GPU a target string `cuda` or `cuda:sm_80` names, with a clear error for unknown architectures."""
    _, _, arch = name.partition(":")
    spec = KNOWN_GPUS.get(arch or DEFAULT_ARCH)
    if spec is None:
        raise AnsorError(f"unknown CUDA architecture '{arch}' in target '{name}': IREE 3.13 targets "
                         f"{', '.join(KNOWN_GPUS)} (use cuda:sm_80 for A100 and H100, whose driver JIT-compiles it)")
    return spec

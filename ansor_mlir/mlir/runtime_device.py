"""The IREE runtime device every program of ansor-mlir runs on: one per device URI and process, host memory
pooled by IREE's caching allocator.

IREE's default host allocator `calloc`s every buffer a call allocates, its outputs and transients included, and
a memory-bound call spends a measurable share of its time zero-filling them (measured:
docs/reports/measurement_fidelity.md). PyTorch's and TVM's outputs are not zeroed, and a program's own consumers
overwrite every element, so a measurement that pays the fill ranks nothing better and understates every IREE
program beside a library. The caching allocator hands freed blocks back to the next call instead.

The pool is freed with its device, so a device lives until the process ends: a buffer released after it
(numpy arrays and IREE's views of them die in any order at interpreter exit) would return its block to freed
memory, and the interpreter crashed at exit that way (`docs/reports/measurement_fidelity.md`).
"""

from __future__ import annotations

from functools import cache

# IREE's allocator names (`--device_allocator`): a pool over the driver's host allocator.
POOLED_ALLOCATORS = ("caching",)


def pools_host_memory(device_uri: str) -> bool:
    """Whether `device_uri` names one of IREE's CPU drivers (`local-sync`, `local-task`), whose allocator
    zero-fills; a GPU driver's allocations are not zeroed and keep their driver's allocator."""
    return device_uri.split(":", 1)[0].startswith("local-")


@cache
def runtime_device(device_uri: str):
    """The process's `iree.runtime.HalDevice` for `device_uri`, made on first use with the caching allocator
    where it pools host memory (IREE's runtime flags, e.g. `--task_topology_group_count`, apply as parsed)."""
    import iree.runtime as rt

    if not pools_host_memory(device_uri):
        return rt.get_device(device_uri)
    return rt.get_driver(device_uri).create_device_by_uri(device_uri, allocators=list(POOLED_ALLOCATORS))


def release_free_blocks(device) -> None:
    """Return the device allocator's cached free blocks to the host heap.

    IREE's caching allocator keeps at most 64 free blocks and hands one out only for a request of exactly its size.
    In a process that has run other programs the list is full of their sizes: every block a new program frees is
    deallocated, and each of its calls `calloc`s and zero-fills its outputs again, so a program timed after others
    reads slower than in a fresh process (measured: docs/reports/measurement_fidelity.md). Each timing calls this
    before it places its inputs (`measure.vm_call.placements`), so every program is timed with room in the list,
    whatever ran before it in the process.
    """
    device.allocator.trim()


def runtime_config(device_uri: str):
    """An `iree.runtime.Config` (a VM instance with a HAL module) on the process's device for `device_uri`."""
    import iree.runtime as rt

    return rt.Config(device=runtime_device(device_uri))

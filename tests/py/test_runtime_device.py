"""The runtime device: IREE's caching allocator on the CPU drivers, room in its free list for each timing, one
device per URI, a clean exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from ansor_mlir.measure.vm_call import placements
from ansor_mlir.mlir.iree_compiler import compile_vmfb
from ansor_mlir.mlir.runtime_device import pools_host_memory, release_free_blocks, runtime_device

DOUBLE = """
func.func @double(%a: tensor<4096xf32>) -> tensor<4096xf32> {
  %0 = arith.addf %a, %a : tensor<4096xf32>
  return %0 : tensor<4096xf32>
}
"""


def host_buffer(device, nbytes: int):
    """A mappable buffer from the device's allocator (its pool, where it has one)."""
    import iree.runtime as rt

    return device.allocator.allocate_buffer(memory_type=rt.MemoryType.DEVICE_LOCAL | rt.MemoryType.HOST_VISIBLE,
                                            allowed_usage=rt.BufferUsage.DEFAULT, allocation_size=nbytes)


def reused_block(device, pattern: np.ndarray) -> np.ndarray:
    """The contents of a buffer allocated right after one holding `pattern` was freed."""
    import iree.runtime as rt

    placed = rt.asdevicearray(device, pattern)
    del placed
    buffer = host_buffer(device, pattern.nbytes)
    return np.array(buffer.map().asarray(list(pattern.shape), pattern.dtype))


def test_a_freed_block_comes_back_without_the_heap_allocators_zero_fill():
    import iree.runtime as rt

    pattern = np.arange(1, 1 + (1 << 14), dtype=np.float32)
    device = runtime_device("local-sync")
    release_free_blocks(device)  # whatever earlier tests in this process left in its free list
    np.testing.assert_array_equal(reused_block(device, pattern), pattern)
    # IREE's default device zero-fills every allocation: the cost the pool removes from each call.
    assert not reused_block(rt.get_device("local-sync"), pattern).any()


def fill_free_list(device, blocks: int = 80) -> None:
    """Free more blocks than the pool's list holds (64), each of a size no timed program asks for."""
    held = [host_buffer(device, (i + 1) * 8192 + 64) for i in range(blocks)]
    del held


def test_each_timing_finds_room_in_the_pool_whatever_ran_before_it():
    """A full free list deallocates every block a program frees, so each call zero-fills its outputs again
    (`runtime_device.release_free_blocks`); placing a timing's inputs makes room first."""
    device = runtime_device("local-sync")
    pattern = np.arange(1, 1 + 3000, dtype=np.float32)
    fill_free_list(device)
    assert not reused_block(device, pattern).any()  # the fault: the freed block was not kept
    fill_free_list(device)
    placements(device, [np.ones(16, np.float32)])
    np.testing.assert_array_equal(reused_block(device, pattern), pattern)


def test_one_device_per_uri_and_gpu_drivers_keep_their_allocator():
    assert runtime_device("local-sync") is runtime_device("local-sync")
    assert pools_host_memory("local-task") and pools_host_memory("local-sync")
    assert not pools_host_memory("cuda") and not pools_host_memory("hip://0")


def test_the_process_exits_cleanly_with_buffers_outliving_their_program(target, tmp_path: Path):
    """Buffers freed at interpreter exit after the program's context must not return to a freed pool."""
    vmfb = tmp_path / "double.vmfb"
    assert compile_vmfb(DOUBLE, target.compile_flags(), vmfb).ok
    script = textwrap.dedent(f"""
        import gc, numpy as np, iree.runtime as rt
        from ansor_mlir.mlir.runtime_device import runtime_config
        config = runtime_config("local-sync")
        context = rt.SystemContext(config=config)
        context.add_vm_module(rt.VmModule.copy_buffer(context.instance, open({str(vmfb)!r}, "rb").read()))
        fn = context.modules.module["double"]
        x = np.ones(4096, np.float32)
        placed = [rt.asdevicearray(config.device, x)]
        out = fn(*placed)
        host = out.to_host()
        assert float(host.sum()) == 8192.0
        del fn, context, config
        gc.collect()
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
    assert "leaked" not in done.stderr

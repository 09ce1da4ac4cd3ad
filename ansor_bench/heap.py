"""The C heap's policy for the benchmarks' contenders: freed memory stays in the process.

PyTorch and numpy allocate each call's output with `malloc`. glibc hands a
large block out of a fresh `mmap` when its (adaptive) threshold says so and
returns freed memory at the top of the heap to the OS, so whether a call
pays a page fault on every page of its output depends on what the process
allocated before: PyTorch's DEP(1,112,112,32,3,1,1), a 1.6 MB output, ran
420 us a call in one benchmark process and 1400 us in another (1179 minor
faults a call; reproduced by pinning the threshold at 128 KiB). IREE's
contenders allocate from IREE's caching allocator and never pay them. With
`mmap` off for blocks and trimming off, every contender reuses its freed
memory from call to call, whatever ran before it.
"""

from __future__ import annotations

import ctypes
import ctypes.util

# glibc's `mallopt` parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
NEVER_TRIM = 2**31 - 1  # an int: `mallopt` takes one


def keep_freed_memory() -> bool:
    """Serve every block from the heap and never trim it (glibc); False where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, NEVER_TRIM))

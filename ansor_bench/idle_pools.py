"""Wait for the other contenders' thread pools to go idle before a contender's slice.

Every runtime keeps its own worker pool in the benchmark's process, and a
pool keeps spinning after its last call so that the next one finds it awake.
At threads > 1 the next contender's workers then share the cores with that
spinner: on the 2-vCPU Zen 4 guest TVM's worker spins a whole core for
about 140 ms after MetaSchedule's last call (its thread pool's spin count),
PyTorch's OpenMP worker for about 10 ms, while a round is 50 ms. The GRP
row of the 2-thread suite read ansor-mlir 285 us and IREE's default 2.87 ms
with MetaSchedule in the run, 229 us and 2.73 ms without it (PyTorch 222 and
215 us). A user's process calls one of them, so each slice starts once the
process's other threads have stopped using CPU: as fast for the contender
whose own pool still spins (it spins for itself between its calls), and no
contender pays for another's.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

# Other threads must use less than this share of one core over a step to count as idle.
IDLE_SHARE = 0.05
STEP_S = 0.005
# The longest wait: a pool that never sleeps (a busy user thread) must not stall the benchmark.
MAX_WAIT_S = 0.5


def other_threads_cpu_s(tasks: Path = Path("/proc/self/task")) -> float | None:
    """CPU seconds used so far by this process's threads other than the caller (None where Linux's per-thread
    scheduler statistics are not readable)."""
    me = str(threading.get_native_id())
    total_ns = 0
    try:
        for task in tasks.iterdir():
            if task.name == me:
                continue
            try:
                total_ns += int((task / "schedstat").read_text().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue  # the thread exited meanwhile
    except OSError:
        return None
    return total_ns * 1e-9


def wait_for_idle_pools(max_wait_s: float = MAX_WAIT_S, step_s: float = STEP_S) -> float:
    """Sleep in `step_s` steps until the process's other threads use under `IDLE_SHARE` of a core over one step,
    at most `max_wait_s`; returns the seconds waited (0 where the statistics are not readable)."""
    start = time.perf_counter()
    before = other_threads_cpu_s()
    if before is None:
        return 0.0
    while time.perf_counter() - start < max_wait_s:
        time.sleep(step_s)
        now = other_threads_cpu_s()
        if now is None or now - before < IDLE_SHARE * step_s:
            break
        before = now
    return time.perf_counter() - start

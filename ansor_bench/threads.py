"""Thread counts for every contender, set before any thread pool exists.

BLAS, OpenMP and TVM read these variables once, when their pools start (for
numpy's OpenBLAS: at `import numpy`), so the benchmark pins them first thing.
This module imports nothing heavy for that reason.
"""

from __future__ import annotations

import os

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                    "NUMEXPR_NUM_THREADS", "TVM_NUM_THREADS")


def pin_threads(threads: int = 1) -> None:
    """Pin every known pool of this process and its children to `threads` threads."""
    os.environ.update({name: str(threads) for name in THREAD_VARIABLES})

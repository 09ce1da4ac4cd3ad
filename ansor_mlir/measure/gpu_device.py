"""Whether this host can run a GPU target's programs: a device IREE's driver for it can open.

Compiling for CUDA needs no GPU (PTX is embedded); timing does. The tuner
asks here before it measures, so a host without a device gets one line
saying so and what to do instead, not a runtime error from deep in a run.
"""

from __future__ import annotations

from functools import lru_cache

import iree.runtime as ireert

from ansor_mlir.core.target import Target


@lru_cache(maxsize=4)
def device_problem(driver: str) -> str | None:
    """None when IREE's `driver` finds a device; otherwise why not (no driver library, no device)."""
    if driver not in ireert.query_available_drivers():
        return f"this IREE runtime has no '{driver}' driver"
    try:
        devices = ireert.get_driver(driver).query_available_devices()
    except RuntimeError as exc:
        parts = str(exc).split("; ")
        return f"IREE's {driver} driver cannot start: {(parts[1] if len(parts) > 1 else parts[0]).strip()}"
    return None if devices else f"IREE's {driver} driver finds no device"


def no_device_message(target: Target) -> str | None:
    """One line for a GPU target whose programs cannot be timed here (None when they can, or for a CPU target):
    what is missing and what to do instead."""
    if target.gpu is None:
        return None
    problem = device_problem(target.runtime_device())
    if problem is None:
        return None
    return (f"target {target.key}: no CUDA device on this host ({problem}), so no candidate can be timed: "
            "pick by the cost model alone (trials=0: candidates are compiled here, none measured), or export a "
            "batch of built candidates (ansor-measure export) and measure it offline on a machine with the GPU")

"""How fast an idle vCPU wakes: the host setting that decides multi-threaded IREE timings in a VM.

IREE's `local-task` workers sleep between dispatches and are woken by futex.
In a KVM guest whose idle vCPUs halt at once (Firecracker boots with
`haltpoll.guest_halt_poll_ns=0`), each wake-up waits for the hypervisor to
run the halted vCPU again: on a 2-vCPU guest the workers' wake-ups averaged
2.3 ms, and 2-thread calls of a 1.7 ms convolution read 4 or 6 ms. OpenMP
pools (PyTorch, OpenBLAS) spin before sleeping and do not pay it. The guest
`haltpoll` cpuidle driver polls `guest_halt_poll_ns` before halting; Linux's
default is 200000 (200 us). A report names the setting it ran under, and the
benchmark may set it for its run and restore it after.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ansor_mlir.errors import AnsorError

HALT_POLL_PARAMETER = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
CPUIDLE_DRIVER = Path("/sys/devices/system/cpu/cpuidle/current_driver")
LINUX_DEFAULT_HALT_POLL_NS = 200_000


@dataclass(frozen=True)
class IdleWakeup:
    """The guest's idle driver and halt-poll window; `halt_poll_ns` is None outside a haltpoll guest."""

    hypervisor: bool
    cpuidle_driver: str
    halt_poll_ns: int | None

    @property
    def halts_at_once(self) -> bool:
        """A guest whose idle vCPUs halt without polling: wake-ups wait for the hypervisor."""
        return self.hypervisor and self.halt_poll_ns == 0

    def text(self) -> str:
        """One phrase for a report's machine line."""
        if not self.hypervisor:
            return f"bare metal, cpuidle {self.cpuidle_driver}"
        poll = "" if self.halt_poll_ns is None else f", guest_halt_poll_ns={self.halt_poll_ns}"
        return f"VM guest, cpuidle {self.cpuidle_driver}{poll}"


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _hypervisor(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    return any(line.startswith("flags") and " hypervisor" in line for line in _read(cpuinfo).splitlines())


def read_idle_wakeup(parameter: Path = HALT_POLL_PARAMETER, driver: Path = CPUIDLE_DRIVER,
                     cpuinfo: Path = Path("/proc/cpuinfo")) -> IdleWakeup:
    """This machine's idle wake-up setting, read from sysfs (absent files read as unknown)."""
    poll = _read(parameter)
    return IdleWakeup(_hypervisor(cpuinfo), _read(driver) or "unknown", int(poll) if poll.isdigit() else None)


@contextmanager
def halt_poll_window(ns: int, parameter: Path = HALT_POLL_PARAMETER) -> Iterator[int]:
    """Set the guest's halt-poll window to `ns` for the block and restore the old value after; yields the old one."""
    old = _read(parameter)
    if not old.isdigit():
        raise AnsorError(f"--guest-halt-poll-ns: {parameter} does not exist: this is not a guest with the haltpoll "
                         "cpuidle driver; run without the option")
    try:
        parameter.write_text(str(ns))
    except OSError as exc:
        raise AnsorError(f"--guest-halt-poll-ns: cannot write {parameter} ({exc.strerror}): run as root or "
                         "without the option") from None
    try:
        yield int(old)
    finally:
        parameter.write_text(old)


def threaded_timing_note(threads: int, idle: IdleWakeup | None = None) -> str | None:
    """What a user tuning at `threads` > 1 should know when this guest's idle vCPUs halt without polling."""
    idle = idle or read_idle_wakeup()
    if threads <= 1 or not idle.halts_at_once:
        return None
    return (f"threads={threads} on a VM whose idle vCPUs halt without polling (guest_halt_poll_ns=0): IREE's task "
            "workers wake late, so multi-threaded timings swing by milliseconds; as root, "
            f"`echo {LINUX_DEFAULT_HALT_POLL_NS} > {HALT_POLL_PARAMETER}` (Linux's default) steadies them")

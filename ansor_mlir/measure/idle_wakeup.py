"""How fast an idle vCPU wakes: the host setting that decides multi-threaded IREE timings in a VM.

IREE's `local-task` workers sleep between dispatches and are woken by futex.
In a KVM guest whose idle vCPUs halt at once (Firecracker boots with
`haltpoll.guest_halt_poll_ns=0`), each wake-up waits for the hypervisor to
run the halted vCPU again, often for longer than the dispatch's own work
(measured: docs/reports/measurement_fidelity.md). OpenMP pools (PyTorch,
OpenBLAS) spin before sleeping and do not pay it. The guest
`haltpoll` cpuidle driver polls `guest_halt_poll_ns` before halting; Linux's
default is 200000 (200 us). A report names the setting it ran under, and the
benchmark may set it for its run and restore it after.

The window acts only under that driver. It registers itself only when the
hypervisor hints that vCPUs are dedicated (`KVM_HINTS_REALTIME`) or the guest
boots with `cpuidle_haltpoll.force=1`; otherwise the guest's cpuidle driver
reads `none`, the parameter file still exists (the `haltpoll` module is built
in), and writing it changes nothing, while a report would name a setting
that had no effect. So the window is refused there with the reason, and the
note to a tuning user names the boot parameter.
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
HALT_POLL_DRIVER = "haltpoll"
FORCE_DRIVER_BOOT_PARAMETER = "cpuidle_haltpoll.force=1"


@dataclass(frozen=True)
class IdleWakeup:
    """The guest's idle driver and halt-poll window; `halt_poll_ns` is None outside a haltpoll guest."""

    hypervisor: bool
    cpuidle_driver: str
    halt_poll_ns: int | None

    @property
    def polls(self) -> bool:
        """Whether the guest's idle loop reads the halt-poll window: only the haltpoll cpuidle driver does."""
        return self.cpuidle_driver == HALT_POLL_DRIVER

    @property
    def halts_at_once(self) -> bool:
        """A guest whose idle vCPUs halt without polling: wake-ups wait for the hypervisor."""
        return self.hypervisor and (not self.polls or self.halt_poll_ns == 0)

    def text(self) -> str:
        """One phrase for a report's machine line."""
        if not self.hypervisor:
            return f"bare metal, cpuidle {self.cpuidle_driver}"
        if self.halt_poll_ns is None:
            return f"VM guest, cpuidle {self.cpuidle_driver}"
        unused = "" if self.polls else f" (unused: no {HALT_POLL_DRIVER} driver, idle vCPUs halt at once)"
        return f"VM guest, cpuidle {self.cpuidle_driver}, guest_halt_poll_ns={self.halt_poll_ns}{unused}"


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
def halt_poll_window(ns: int, parameter: Path = HALT_POLL_PARAMETER,
                     driver: Path = CPUIDLE_DRIVER) -> Iterator[int]:
    """Set the guest's halt-poll window to `ns` for the block and restore the old value after; yields the old one.

    Refused unless the haltpoll cpuidle driver runs: without it the window is written and ignored."""
    old = _read(parameter)
    if not old.isdigit():
        raise AnsorError(f"--guest-halt-poll-ns: {parameter} does not exist: this is not a guest with the haltpoll "
                         "cpuidle driver; run without the option")
    running = _read(driver) or "unknown"
    if running != HALT_POLL_DRIVER:
        raise AnsorError(f"--guest-halt-poll-ns: this guest's cpuidle driver is {running}, not {HALT_POLL_DRIVER}, "
                         f"so the window would be ignored; boot the guest with {FORCE_DRIVER_BOOT_PARAMETER} "
                         "or run without the option")
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
    if not idle.polls:
        return (f"threads={threads} on a VM whose idle vCPUs halt without polling (cpuidle {idle.cpuidle_driver}, "
                f"no {HALT_POLL_DRIVER} driver): IREE's task workers wake late, so multi-threaded timings swing; "
                f"booting the guest with {FORCE_DRIVER_BOOT_PARAMETER} lets them poll")
    return (f"threads={threads} on a VM whose idle vCPUs halt without polling (guest_halt_poll_ns=0): IREE's task "
            "workers wake late, so multi-threaded timings swing by milliseconds; as root, "
            f"`echo {LINUX_DEFAULT_HALT_POLL_NS} > {HALT_POLL_PARAMETER}` (Linux's default) steadies them")

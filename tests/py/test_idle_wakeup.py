"""The idle wake-up setting of a VM guest: read, set for a benchmark and restored, and named to a tuning user."""

from __future__ import annotations

import pytest

from ansor_mlir.errors import AnsorError
from ansor_mlir.measure.idle_wakeup import IdleWakeup, halt_poll_window, read_idle_wakeup, threaded_timing_note


def guest_files(tmp_path, poll: str, driver_name: str):
    """The sysfs and cpuinfo files of a KVM guest with this halt-poll window and cpuidle driver."""
    parameter, driver, cpuinfo = tmp_path / "poll", tmp_path / "driver", tmp_path / "cpuinfo"
    parameter.write_text(f"{poll}\n")
    driver.write_text(f"{driver_name}\n")
    cpuinfo.write_text("flags\t\t: fpu avx2 hypervisor lahf_lm\n")
    return parameter, driver, cpuinfo


def test_the_halt_poll_window_is_read_set_for_a_block_and_restored(tmp_path):
    parameter, driver, cpuinfo = guest_files(tmp_path, "0", "haltpoll")
    idle = read_idle_wakeup(parameter, driver, cpuinfo)
    assert idle.halts_at_once and idle.text() == "VM guest, cpuidle haltpoll, guest_halt_poll_ns=0"
    with halt_poll_window(200000, parameter, driver) as old:
        assert old == 0 and not read_idle_wakeup(parameter, driver, cpuinfo).halts_at_once
    assert parameter.read_text() == "0"
    with pytest.raises(RuntimeError), halt_poll_window(5, parameter, driver):
        raise RuntimeError("the benchmark failed")
    assert parameter.read_text() == "0"  # restored on failure too
    cpuinfo.write_text("flags\t\t: fpu avx2 lahf_lm\n")
    bare = read_idle_wakeup(tmp_path / "absent", tmp_path / "absent", cpuinfo)
    assert not bare.halts_at_once and bare.text() == "bare metal, cpuidle unknown"
    with pytest.raises(AnsorError, match="is not a guest with the haltpoll cpuidle driver"):
        with halt_poll_window(5, tmp_path / "absent"):
            pass


def test_only_threaded_tuning_on_a_guest_halting_at_once_hears_about_it():
    halting, polling = IdleWakeup(True, "haltpoll", 0), IdleWakeup(True, "haltpoll", 200000)
    note = threaded_timing_note(2, halting)
    assert note and "threads=2" in note and "echo 200000 > /sys/module/haltpoll/parameters/guest_halt_poll_ns" in note
    assert threaded_timing_note(1, halting) is None and threaded_timing_note(2, polling) is None
    assert threaded_timing_note(2, IdleWakeup(False, "intel_idle", None)) is None


def test_without_the_haltpoll_driver_the_window_is_named_unused_and_refused(tmp_path):
    # A Firecracker guest without KVM_HINTS_REALTIME: the parameter exists, the driver is `none`, and it halts at once.
    parameter, driver, cpuinfo = guest_files(tmp_path, "200000", "none")
    idle = read_idle_wakeup(parameter, driver, cpuinfo)
    assert idle.halts_at_once and not idle.polls
    assert idle.text() == ("VM guest, cpuidle none, guest_halt_poll_ns=200000 "
                           "(unused: no haltpoll driver, idle vCPUs halt at once)")
    with pytest.raises(AnsorError, match="cpuidle driver is none, not haltpoll.*cpuidle_haltpoll.force=1"):
        with halt_poll_window(0, parameter, driver):
            pass
    assert parameter.read_text() == "200000\n"  # untouched
    note = threaded_timing_note(2, idle)
    assert note and "cpuidle_haltpoll.force=1" in note and "echo" not in note

"""The runtime device a tuned program runs fastest on: IREE's task system, or the calling thread alone.

At `threads=N` a program is tuned on `local-task` with N workers. Every
dispatch then goes through IREE's task system, which on a small VM costs
more per call (waking the workers, the caller's wait) than a small program
gains from a second thread. So the tuned program is timed on both devices,
alternately, and the threads are kept only when they pay: when the threaded
program is faster by `THREADS_GAIN` in the median round and no slower over
all rounds together (the time a user pays on average) in most of three
comparisons a second apart (`verification.SPREAD_COMPARISONS`). The total
is not asked for the same gain: that counted `local-task`'s rare late-worker
rounds twice and kept programs on one thread that the threads ran faster.
Otherwise the program runs on one thread, as PyTorch runs an op below its
grain size inline: as fast, and it leaves the other cores to the user. The
choice is a runtime flag (`--device=local-sync`).

When the threaded program is IREE's default
build of the program as given (every task fell back to it, no rewrite
kept), the burden turns: that build on the threaded device is what the user
has without tuning, so one thread must win by `THREADS_GAIN` in the median
round, and not lose in total, to replace it; a tie would otherwise leave
the user a program slower than IREE's default.

The threads must prove themselves, not one thread: on a shared 2-vCPU guest
the host's phases move a one-thread program's time within seconds while the
second worker often wakes too late to share the work, so a bar one thread
must clear beyond the noise keeps programs on `local-task` that one thread
runs faster.

On one thread the program is built as for one thread: IREE's synchronous
ABI, without the fences a threaded build waits on (`Target.compile_flags`),
which cost microseconds per call and buy nothing on the calling thread. It
applies the one-thread search's choices where the
run made them (`tuning.one_thread_start`): a kernel tuned to be shared by
two workers is not the best one for one thread, and comparing the threaded
program on both devices would keep programs on `local-task` that one thread
runs faster with its own choices. (measured: docs/reports/measurement_fidelity.md)
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ansor_mlir.core.target import Target
from ansor_mlir.database.records import ProgramCheck
from ansor_mlir.measure.builder import Builder
from ansor_mlir.measure.runner import Runner
from ansor_mlir.tuning.verification import (
    SPREAD_GAP_S,
    ProgramVariant,
    UserProgram,
    judge,
    majority_verdict,
    time_pair,
)

ONE_THREAD = "local-sync"
# The threaded program must win by this much in the median paired speedup, and not lose in the ratio of total times.
THREADS_GAIN = 0.05


@dataclass(frozen=True)
class DeviceChoice:
    """The device the program runs on, and the alternated timing that chose it (None: nothing was timed)."""

    device: str
    threaded: str
    check: ProgramCheck | None = None
    reason: str = ""
    # Whether the one-thread side was timed with the one-thread search's choices (else the threaded ones').
    one_thread_choices: bool = False
    # (chose it, comparisons): how many of the spread comparisons chose `device` (`SPREAD_COMPARISONS`).
    agreed: tuple[int, int] = (1, 1)

    @property
    def records_threads(self) -> int:
        """The thread count whose records the program applies on `device` (0: the target's own)."""
        return 1 if self.device == ONE_THREAD and self.one_thread_choices else 0

    def note(self, name: str, threads: int) -> str:
        """One line for the user: which device, by how much, and the flag that selects it."""
        if self.check is None:
            return f"{name}: runs on {self.device} ({self.reason})"
        which = " with the one-thread search's choices" if self.one_thread_choices else ""
        chose, made = self.agreed
        votes = f" ({chose} of {made} comparisons, {SPREAD_GAP_S:g} s apart)" if made > 1 else ""
        times = (f"{self.check.tuned_s * 1e6:.1f} us on {ONE_THREAD}{which} against "
                 f"{self.check.default_s * 1e6:.1f} us on {self.threaded} with {threads} workers{votes}")
        if self.device == ONE_THREAD:
            return (f"{name}: the tuned program runs on one thread, {self.threaded}'s workers do not pay: {times}; "
                    f"run it with --device={ONE_THREAD} (`TuneResult.device`, `ansor_mlir.compile(..., device=...)`)")
        return f"{name}: the tuned program stays on {self.threaded}: {times}"


def build_target(target: Target, device: str) -> Target:
    """The target a program running on `device` is built for: one thread's on `local-sync` (no fences)."""
    return replace(target, threads=1) if device == ONE_THREAD and target.threads > 1 else target


def alternatives(target: Target) -> tuple[str, ...]:
    """The devices worth comparing: the target's threaded device and one thread, for a CPU with threads > 1."""
    if target.gpu is not None or target.threads <= 1 or not target.runs_here:
        return ()
    return (target.runtime_device(), ONE_THREAD)


@dataclass(frozen=True)
class OneThreadChoices:
    """The tuning spec of the one-thread search's best choices (None: IREE's default on every task)."""

    spec: str | None


def choose_device(target: Target, builder: Builder, runner: Runner, program: UserProgram, spec: str | None,
                  seed: int = 0, rounds: int = 15, one_thread: OneThreadChoices | None = None,
                  untuned: bool = False) -> DeviceChoice:
    """Build `program` with `spec` (the log's best, as `ansor_mlir.compile` builds it) and time it on the
    target's threaded device, alternately with the program on one thread (with `one_thread`'s spec where the
    run has one-thread choices, else `spec`); keep the threads only when they win beyond the noise, or, when
    the threaded program is IREE's default build of the user's program (`untuned`), unless one thread does."""
    threaded = target.runtime_device()
    if not alternatives(target):
        return DeviceChoice(threaded, threaded, reason="one thread, a GPU or another machine: nothing to choose")
    alone = spec if one_thread is None else one_thread.spec
    which = "" if one_thread is None else " with the one-thread search's choices"
    timing = time_pair(builder, runner, ProgramVariant(f"the tuned program on {threaded}", program, spec),
                       ProgramVariant(f"the tuned program on {ONE_THREAD}{which}", program, alone, one_thread=True),
                       seed, rounds, (threaded, ONE_THREAD))
    if not timing.comparisons:
        return DeviceChoice(threaded, threaded, reason=timing.failure)
    device, check, agreed = majority(threaded, timing.comparisons, untuned)
    return DeviceChoice(device, threaded, check, one_thread_choices=one_thread is not None,
                        agreed=(agreed, len(timing.comparisons)))


def majority(threaded: str, comparisons: Sequence[tuple[Sequence[float], Sequence[float]]], untuned: bool = False,
             ) -> tuple[str, ProgramCheck, int]:
    """(device, check, agreed) decided by most of several comparisons (`decide` each; a tie keeps one thread, or
    the threads for an `untuned` program): the check of the first comparison that chose the device, and how
    many did."""
    keeps = (lambda verdict: verdict[0] == ONE_THREAD) if untuned else (lambda verdict: verdict[0] == threaded)
    (device, check), agreed = majority_verdict([decide(threaded, *samples, untuned=untuned)
                                                for samples in comparisons], keeps)
    return device, check, agreed


def threads_speedups(threaded_s: Sequence[float], one_thread_s: Sequence[float]) -> tuple[float, float]:
    """(median paired speedup, speedup of the total times) of the threads over one thread in alternated rounds."""
    paired = statistics.median(o / t for o, t in zip(one_thread_s, threaded_s, strict=True))
    return paired, sum(one_thread_s) / sum(threaded_s)


def decide(threaded: str, threaded_s: Sequence[float], one_thread_s: Sequence[float], untuned: bool = False,
           ) -> tuple[str, ProgramCheck]:
    """(device, check) from alternated rounds: one thread unless the `threaded` device's program is faster by
    `THREADS_GAIN` in the median round and not slower in total; for an `untuned` program (IREE's default build),
    the threads unless one thread wins so. The check reads as speedups of one thread over the threads, accepted
    where one runs."""
    paired, total = threads_speedups(threaded_s, one_thread_s)
    if untuned:
        threads_pay = not (paired <= 1.0 / (1.0 + THREADS_GAIN) and total <= 1.0)
    else:
        threads_pay = paired >= 1.0 + THREADS_GAIN and total >= 1.0
    check = judge(threaded_s, one_thread_s, 0.0)
    speedups = f"speedup {paired:.3f} in the median round, {total:.3f} in total"
    reason = ("" if not threads_pay else
              f"IREE's default build stays on {threaded}: one thread does not win ({speedups})" if untuned else
              f"{threaded} is faster ({speedups})")
    check = replace(check, accepted=not threads_pay, reason=reason)
    return (threaded if threads_pay else ONE_THREAD), check

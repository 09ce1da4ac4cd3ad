"""The runner interface: check and time built programs, answering with futures.

A `RunInput` carries everything a measurement needs as bytes: the program,
the inputs and the expected outputs (`.npy` encoded), so a runner on another
host or inside a distributed engine can measure it with no shared file
system (after TVM MetaSchedule's `Runner`, minus its artifact paths).

Timing belongs to the runner: it reports the median and spread of the
kernel's time by its own method (the local runner times calls on the host
clock; a GPU runner would use device timers). Every answer is checked against
the references, and failures are data: a `MeasureResult` with an `ErrorKind`.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import ClassVar

from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.measure.builder import BuildResult, BuiltProgram


@dataclass(frozen=True)
class RunInput:
    """One program to check and time, with its data."""

    program: BuiltProgram
    # The arguments, `.npy` encoded (`measure.inputs.encode_array`).
    inputs: tuple[bytes, ...]
    # Expected outputs (`.npy`); a mismatch is WRONG_ANSWER. None: nothing to check (the reference itself).
    references: tuple[bytes, ...] | None = None
    # Send the outputs back (the reference run: they become the references).
    return_outputs: bool = False
    # Wall-clock limit; None: the runner's own, scaled to `expected_s`.
    timeout_s: float | None = None
    # Seconds per call of an equivalent program (IREE's default), when known: a slow task gets a longer limit.
    expected_s: float | None = None


@dataclass(frozen=True)
class RunResult:
    """The measurement (its `compile_s` is the builder's business, left 0) and the outputs if asked for."""

    measured: MeasureResult
    outputs: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class CompareInput:
    """Programs computing the same function, timed alternately round by round on the same inputs.

    The first program is the baseline: every other program's outputs must
    match its outputs. Alternating keeps the ratios honest on a noisy machine.
    """

    programs: tuple[BuiltProgram, ...]
    inputs: tuple[bytes, ...]
    rounds: int = 15
    # Each round calls each program repeatedly for at least this long and keeps the round's median.
    min_round_s: float = 0.05
    timeout_s: float | None = None
    # The runtime device of each program (`local-sync`, `local-task`); empty: the target's for all.
    devices: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompareResult:
    """Per program, one median per round (seconds), or why there is none; `wrong` lists programs whose
    outputs differ from the baseline's."""

    samples: tuple[tuple[float, ...], ...] = ()
    error: ErrorKind = ErrorKind.NONE
    message: str = ""
    wrong: tuple[int, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error == ErrorKind.NONE and bool(self.samples)


class Runner(ABC):
    """Measures run inputs; `submit` returns at once, the future holds the result."""

    # Runs one at a time on one device and times programs alternately there (`submit_compare`): a batch's
    # candidates are timed against an anchor program (`tuning.anchor`). A cluster's workers are many devices.
    times_one_device: ClassVar[bool] = False

    @abstractmethod
    def submit(self, item: RunInput) -> Future[RunResult]: ...

    def submit_compare(self, item: CompareInput) -> Future[CompareResult]:
        """Time programs alternately (whole-program verification); runners that cannot say so."""
        raise NotImplementedError(f"{type(self).__name__} cannot time programs alternately")

    def run(self, items: Sequence[RunInput]) -> list[RunResult]:
        """Submit all, wait for all: results in the order of `items`."""
        futures = [self.submit(item) for item in items]
        return [f.result() for f in futures]

    def notes(self) -> list[str]:
        """What the console should say about where measurements run (a cluster's workers); none locally."""
        return []

    def close(self) -> None:
        """Release workers (a runner stays usable; it starts them again when needed)."""
        return None

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_builds(
    runner: Runner, builds: Sequence[BuildResult], run_input: Callable[[BuiltProgram], RunInput]
) -> list[MeasureResult]:
    """The measurement of every build, in order: a build failure is its result, the rest are run.

    All runs are submitted before any is awaited, so a remote runner may
    measure them concurrently; each result carries its build's `compile_s`.
    """
    futures = [runner.submit(run_input(b.program)) if b.ok and b.program else None for b in builds]
    results = []
    for build, future in zip(builds, futures, strict=True):
        if future is None:
            results.append(MeasureResult(error=build.error, compile_s=build.compile_s, message=build.message))
        else:
            results.append(dataclasses.replace(future.result().measured, compile_s=build.compile_s))
    return results

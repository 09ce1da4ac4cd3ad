"""What a measurement produces: times, or an error kind. Failures are data."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class ErrorKind(str, Enum):
    """Ansor's measurement error codes, as recorded in the log."""

    NONE = "none"
    INVALID_SCHEDULE = "invalid_schedule"
    COMPILE_ERROR = "compile_error"
    COMPILE_TIMEOUT = "compile_timeout"
    RUNTIME_ERROR = "runtime_error"
    RUN_TIMEOUT = "run_timeout"
    WRONG_ANSWER = "wrong_answer"
    # Zero-trial mode: chosen by the cost model and compiled, never run or timed.
    NOT_MEASURED = "not_measured"


@dataclass(frozen=True)
class MeasureResult:
    """Median and spread of the kernel time, or why there is none."""

    error: ErrorKind
    median_s: float | None = None
    spread_s: float | None = None
    repeats: int = 0
    compile_s: float = 0.0
    max_abs_error: float | None = None
    message: str = ""
    times_s: tuple[float, ...] = field(default_factory=tuple)
    # Who measured it: the worker (`local`, or a Dask worker's address) and the device (`HOST:local-sync`);
    # empty when nothing ran (a build failure) or in logs written before these fields existed.
    worker: str = ""
    device: str = ""
    # Anchored times (`tuning.anchor`): `median_s` and `spread_s` are the anchor's recorded time times the
    # program's median ratio to it in alternated rounds; `measured_s` is the median timed alone and
    # `reference_s` the anchor's median in those rounds.
    measured_s: float | None = None
    reference_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.error == ErrorKind.NONE and self.median_s is not None

    def beats(self, incumbent: MeasureResult) -> bool:
        """Faster beyond its own noise: this median plus its spread (interquartile range) is below the
        incumbent's median, so a win inside the challenger's scatter does not displace the incumbent.

        The incumbent's spread does not count: one noisy measurement of IREE's default would otherwise keep
        every candidate from displacing it, clearly faster ones included, and the tuned program would apply
        IREE's default (measured: docs/reports/measurement_fidelity.md).
        """
        if not self.ok:
            return False
        if not incumbent.ok:
            return True
        return self.median_s + (self.spread_s or 0.0) < incumbent.median_s

    def to_dict(self) -> dict:
        return {
            "error": self.error.value,
            "median_s": self.median_s,
            "spread_s": self.spread_s,
            "repeats": self.repeats,
            "compile_s": round(self.compile_s, 4),
            "max_abs_error": self.max_abs_error,
            "message": self.message,
            **({"worker": self.worker} if self.worker else {}),
            **({"device": self.device} if self.device else {}),
            **({"measured_s": self.measured_s, "reference_s": self.reference_s} if self.measured_s else {}),
        }

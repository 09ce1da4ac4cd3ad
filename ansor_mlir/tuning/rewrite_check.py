"""Whether the program rewrites paid off: the tuned rewritten program against IREE's default of the program as given.

Every task's candidates are checked against IREE's default build of the
*rewritten* program (`verification`), so a rewrite that makes IREE's own
build slower is never caught there: tuning can win over a slow rewritten
default and still lose to the program as given
(measured: docs/reports/program_rewrites.md). So after tuning, when a rewrite applied,
the tuned program (built as `ansor_mlir.compile` builds it) and IREE's
default of the program as given are timed alternately; the rewrite is
dropped, and the program as given kept with IREE's default, only when that
wins beyond the noise (`verification.judge`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ansor_mlir.database.records import ProgramCheck
from ansor_mlir.measure.builder import Builder
from ansor_mlir.measure.runner import Runner
from ansor_mlir.tuning.verification import ProgramVariant, UserProgram, judge, majority_verdict, time_pair

# The program as given must win by this much to undo the rewrites (and the tuning of the tasks they made): a
# program timed alternately against itself on a shared host reads a few percent either way
# (measured: docs/reports/measurement_fidelity.md).
MIN_LOSS = 0.05


@dataclass(frozen=True)
class RewriteCheck:
    """Whether the tuned rewritten program is kept, and the alternated timing that decided it (None: not timed;
    the rewrites stay unless the tuned program did not build or run)."""

    kept: bool
    check: ProgramCheck | None = None
    reason: str = ""

    def note(self, name: str, rewrites: str) -> str:
        """One line for the user: what was compared, and what the tuned module is."""
        if self.check is None and self.kept:
            return f"{name}: rewrites {rewrites} kept without a check ({self.reason})"
        if self.check is None:
            return (f"{name}: rewrites {rewrites} dropped ({self.reason}); the tuned module is the program as given, "
                    "built as IREE builds it")
        times = (f"{self.check.tuned_s * 1e6:.1f} us tuned with rewrites {rewrites}, "
                 f"{self.check.default_s * 1e6:.1f} us for IREE's default of the program as given")
        if self.kept:
            return f"{name}: the rewritten, tuned program is kept: {times}"
        return (f"{name}: the rewritten, tuned program lost to IREE's default of the program as given ({times}); "
                "the tuned module is the program as given, built as IREE builds it: "
                "tune it with rewrites=none for a tuned program without the rewrites")


def decide(given_s: tuple[float, ...], tuned_s: tuple[float, ...]) -> RewriteCheck:
    """Keep the rewrites unless the program as given wins beyond the noise (paired rounds, `judge`)."""
    lost = judge(tuned_s, given_s, MIN_LOSS)
    check = judge(given_s, tuned_s, 0.0)
    return RewriteCheck(kept=not lost.accepted, check=check,
                        reason="" if not lost.accepted else "the program as given ran faster")


def check_rewrites(builder: Builder, runner: Runner, given: UserProgram, rewritten: UserProgram, spec: str | None,
                   seed: int = 0, rounds: int = 15) -> RewriteCheck:
    """Build the program as given (IREE's default) and the rewritten one with `spec` (the log's best), time them
    alternately on the same inputs, and keep the rewrites unless the program as given wins or the tuned program
    does not build or run."""
    tuned = ProgramVariant("the tuned program", rewritten, spec)
    timing = time_pair(builder, runner, ProgramVariant("the program as given", given), tuned, seed, rounds)
    if timing.failed == tuned.label:  # never chosen: the program as given builds and runs
        return RewriteCheck(kept=False, reason=timing.failure)
    if not timing.comparisons:
        return RewriteCheck(kept=True, reason=timing.failure)
    return majority([decide(*samples) for samples in timing.comparisons])


def majority(checks: list[RewriteCheck]) -> RewriteCheck:
    """The rewrites are dropped only when most comparisons drop them: the first check that agrees with most."""
    return majority_verdict(checks, lambda check: not check.kept)[0]

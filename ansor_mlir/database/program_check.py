"""A whole-program check: the user's program built with one task's candidate, timed against the program without.

It travels on the candidate's measurement record (`Record.program`), so the log says both what the task
measured alone and what the program measured with it; `queries.best_records` trusts the program's verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansor_mlir.database.schema import SchemaError, describe, is_bool, is_count, is_str, is_time, is_zero, read_field


@dataclass(frozen=True)
class ProgramCheck:
    """The user's whole program built with one task's candidate, timed alternately against the same program
    without it: per-round speedups (baseline / tuned), their quartiles, and the verdict.

    The baseline is IREE's default build with the other tasks' choices accepted before (`others` of them;
    0: IREE's default build itself), so a task's gain is judged where it will run: dispatches IREE runs side
    by side hide a faster one behind a slower one until that one is tuned too. Tasks whose gains are each
    below the noise are judged `together`: one program with all their candidates, one verdict for each.
    """

    default_s: float
    tuned_s: float
    ratio_low: float
    ratio: float
    ratio_high: float
    rounds: int
    accepted: bool
    reason: str = ""
    others: int = 0
    together: int = 1  # tasks whose candidates this one program carried (1: this task's alone)

    def to_dict(self) -> dict:
        data = {"default_s": self.default_s, "tuned_s": self.tuned_s, "ratio_low": self.ratio_low,
                "ratio": self.ratio, "ratio_high": self.ratio_high, "rounds": self.rounds,
                "accepted": self.accepted, "reason": self.reason, "others": self.others}
        return data if self.together == 1 else {**data, "together": self.together}

    @staticmethod
    def from_dict(data: dict) -> ProgramCheck:
        return ProgramCheck(float(data["default_s"]), float(data["tuned_s"]), float(data["ratio_low"]),
                            float(data["ratio"]), float(data["ratio_high"]), int(data["rounds"]),
                            bool(data["accepted"]), str(data.get("reason", "")), int(data.get("others", 0)),
                            int(data.get("together", 1)))


def program_from_dict(data: object) -> ProgramCheck:
    """A check from a record's `program` object, every field checked."""
    if not isinstance(data, dict):
        raise SchemaError(f"'program' is {describe(data)}, expected an object")
    rounds = read_field(data, "rounds", is_count, "a count", "program.")
    # A check that timed nothing (the program did not build or run: rounds 0) has no times, written as 0.
    timed, untimed = (is_time, "a finite, positive number") if rounds else (is_zero, "0 (nothing was timed)")
    for key in ("default_s", "tuned_s", "ratio_low", "ratio", "ratio_high"):
        read_field(data, key, timed, untimed, "program.")
    read_field(data, "accepted", is_bool, "true or false", "program.")
    read_field(data, "reason", is_str, "a string", "program.", required=False)
    read_field(data, "others", is_count, "a count", "program.", required=False)
    read_field(data, "together", is_count, "a count", "program.", required=False)
    return ProgramCheck.from_dict(data)

"""Whole-program verification: a task's choice must make the user's program faster, not just the task.

After the search, the best measured candidates of each task are built into
the user's whole program as `ansor_mlir.compile` builds the tuned model:
IREE compiles the program's source text (after its rewrites) with a tuning
spec carrying that candidate and the choices other tasks won before, and the
program is timed alternately against the same program without the candidate,
round by round on the same freshly placed inputs (`Runner.submit_compare`),
the IREE tuner's model-benchmark phase after its dispatch phase. Tasks go in
the order of the time they promise to save (`ProgramVerifier.verify`), and at
the end the whole tuned program is timed against IREE's default build
(`Verification.whole`). Every untuned dispatch builds as IREE's default,
and a model's weights, served at run time, go through
their layout transforms once, when the program loads (IREE hoists them):
re-entering IREE at the flow level instead ran them on every call, which
slowed both programs and diluted every gain (on ResNet-50 no candidate won).
Only candidates that beat IREE's default as tasks are checked. Tasks whose
promised saving is each below the noise (`TOGETHER_SHARE` of the program's
estimated time) are judged together, in one program with all their
candidates (halved once when it loses), not one build and timing each.
A candidate is accepted only when its program wins beyond the measured
noise (`judge`); one whose median speedup clears the bar while its lower
quartile does not (`inconclusive`) is timed for as many rounds again, up to
twice, and judged on all of them. The verdicts are appended to the log as records carrying a
`ProgramCheck`, and `database.records.best_records` then applies the
accepted candidate with the best program speedup, or IREE's default when
every candidate lost. Resuming skips candidates already checked.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import TypeVar

from ansor_mlir.codegen.transform_strategy import render_strategy, strategy_name
from ansor_mlir.codegen.tuning_spec import render_spec, spec_sources
from ansor_mlir.core.measure_result import ErrorKind
from ansor_mlir.core.schedule import Family
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.database.records import ProgramCheck, Record, best_records, for_target, now
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.entry_point import EntryPoint, entry_point
from ansor_mlir.measure.builder import Builder, BuildResult, BuiltProgram, ProgramBuildInput
from ansor_mlir.measure.inputs import encode_array, make_arrays
from ansor_mlir.measure.runner import CompareInput, CompareResult, RunInput, Runner
from ansor_mlir.tuning.task_result import TaskResult

# A candidate must speed the program up by at least this much (median of the per-round speedups) ...
MIN_GAIN = 0.01
# Seconds of alternated timing one task's check aims at: a program of seconds per call (a large convolution
# untuned) gets fewer rounds, never fewer than `MIN_ROUNDS`.
CHECK_BUDGET_S = 60.0
MIN_ROUNDS = 5
MIN_ROUND_S = 0.05
# The program-level choices after tuning (`rewrite_check`, `device_choice`) time their pair this many times, this
# far apart, and most comparisons decide (`majority_verdict`): a shared host has phases of seconds in which
# `local-task`'s workers run at one thread's speed, and one comparison can sit inside one and decide the program's
# device or rewrites wrongly (measured: docs/reports/measurement_fidelity.md).
SPREAD_COMPARISONS = 3
SPREAD_GAP_S = 1.0
# Times an inconclusive check is timed again (`judged`), each time for as many rounds as the first.
AGAIN = 2
# The sign test's level (`judge`).
SIGN_TEST_P = 0.05
# A task promising to save less than this share of the program's estimated time cannot win beyond the noise on
# its own: such tasks are judged together (`ProgramVerifier._together`).
TOGETHER_SHARE = 2 * MIN_GAIN
# A task gain at least this large that the whole program turns into a ratio at most this low is no noise: the
# program's build (the tuning spec on the program's source) differs from the flow-level build the candidate was
# measured as (one build folds a fused pad's unit dimension, the other does not), and the user is told why tuning
# gained nothing (measured: docs/reports/measurement_fidelity.md).
SUSPECT_TASK_GAIN = 1.2
SUSPECT_PROGRAM_RATIO = 0.9
# The default program of a slow model may take minutes per call.
REFERENCE_TIMEOUT_S = 600.0
# A whole model compiles for longer than one task's candidate (the builder's own limit).
PROGRAM_COMPILE_TIMEOUT_S = 600.0


def judge(default_s: Sequence[float], tuned_s: Sequence[float], min_gain: float = MIN_GAIN) -> ProgramCheck:
    """Accept a tuned program only when it wins beyond the noise of the alternated rounds.

    Round `i` timed both programs on the same inputs, so `default_s[i] /
    tuned_s[i]` is a paired speedup. Accepted: the median speedup is at least
    `1 + min_gain`, and the tuned program won at least three rounds in four
    (the lower quartile is above 1) or so many that a tie would win as many
    with a chance of at most `SIGN_TEST_P` (a one-sided sign test), so one
    lucky round cannot carry it, and more rounds can settle a real gain that a
    noisy host hides in a quarter of them (ResNet-18's Winograd input
    transform on a 2-vCPU guest: a median of 1.09 over 30 rounds, as its task
    times predicted, with a lower quartile of 0.98).
    """
    ratios = sorted(d / t for d, t in zip(default_s, tuned_s, strict=True))
    low, mid, high = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else (ratios[0],) * 3
    accepted = mid >= 1.0 + min_gain and (low > 1.0 or sign_test_p(sum(r > 1.0 for r in ratios), len(ratios))
                                          <= SIGN_TEST_P)
    reason = "" if accepted else (
        f"the program is not faster beyond the noise (speedup {mid:.3f}, lower quartile {low:.3f})")
    return ProgramCheck(statistics.median(default_s), statistics.median(tuned_s), low, mid, high, len(ratios),
                        accepted, reason)


def sign_test_p(wins: int, rounds: int) -> float:
    """The chance that a program no faster than its baseline wins at least `wins` of `rounds` paired rounds."""
    return sum(math.comb(rounds, k) for k in range(wins, rounds + 1)) / 2.0**rounds


def compare_budget(program_s: float, programs: int, rounds: int) -> tuple[int, float]:
    """Rounds and a time limit for timing `programs` programs of about `program_s` each alternately: fewer rounds
    for a slow program (`CHECK_BUDGET_S`), never fewer than `MIN_ROUNDS`; the limit allows for a program several
    times slower than the first."""
    per_round = programs * max(MIN_ROUND_S, program_s)
    rounds = max(MIN_ROUNDS, min(rounds, int(CHECK_BUDGET_S / per_round)))
    return rounds, 60.0 + 4.0 * rounds * per_round


def program_inputs(text: str, what: str, seed: int) -> tuple[EntryPoint, tuple[bytes, ...]]:
    """The program's entry point and the seeded inputs every whole-program timing of it uses."""
    entry = entry_point(text, what)
    return entry, tuple(encode_array(a) for a in make_arrays(entry.input_types, f"{what}:{seed}"))


def to_verify(records: list[Record], result: TaskResult, target: Target, count: int) -> list[Record]:
    """The task's `count` fastest correct non-default candidates that ran faster than IREE's default as tasks
    (when it was measured) and that the program has not yet checked."""
    key = result.task.key
    mine = [r for r in records if r.task_key == key and for_target(r, target.key, target.fingerprint)]
    checked = {r.candidate.identity for r in mine if r.program is not None}
    default = min((r.result.median_s for r in mine if r.program is None and r.ok and r.is_default), default=math.inf)
    measured = sorted((r for r in mine if r.program is None and r.ok and not r.is_default and r.sketch is not None
                       and r.result.median_s < default), key=lambda r: r.result.median_s)
    picks: list[Record] = []
    for record in measured:
        if record.candidate.identity not in {p.candidate.identity for p in picks}:
            picks.append(record)
        if len(picks) == count:
            break
    return [r for r in picks if r.candidate.identity not in checked]


@dataclass(frozen=True)
class UserProgram:
    """The program the user tunes: its text and, for a model, the weights its text names (an `.irpa`)."""

    text: str
    name: str
    parameters: bytes = field(default=b"", repr=False)
    parameter_scope: str = "model"


@dataclass(frozen=True)
class ProgramVariant:
    """One side of a program-level comparison: the program, its tuning spec (None: IREE's default) and the
    words that name it in a failure."""

    label: str
    program: UserProgram
    spec: str | None = None
    one_thread: bool = False  # built for one thread (`ProgramBuildInput.one_thread`)


Samples = tuple[tuple[float, ...], tuple[float, ...]]
V = TypeVar("V")


@dataclass(frozen=True)
class PairTiming:
    """Two programs timed alternately: per comparison, per round, each one's median (`comparisons`), or why
    they were not."""

    comparisons: tuple[Samples, ...] = ()
    failure: str = ""
    # The label of the one program that did not build or run, when the failure is one program's.
    failed: str = ""


def time_pair(builder: Builder, runner: Runner, first: ProgramVariant, second: ProgramVariant, seed: int = 0,
              rounds: int = 15, devices: tuple[str, str] | tuple[()] = (), comparisons: int = SPREAD_COMPARISONS,
              gap_s: float = SPREAD_GAP_S) -> PairTiming:
    """Build both programs (once when they are the same), run the second once to size the comparison
    (`compare_budget`), then time them alternately on the same seeded inputs, each on its device:
    `comparisons` times, `gap_s` apart, so that one phase of a shared host cannot decide them all.

    The program-level choices made after tuning (`rewrite_check`, `device_choice`) are such pairs.
    """
    pair = (first, second)
    entry, inputs = program_inputs(first.program.text, first.program.name, seed)
    same = (first.program.text, first.spec, first.one_thread) == (second.program.text, second.spec,
                                                                  second.one_thread)
    items = [ProgramBuildInput(c.program.text, entry.name, c.spec, PROGRAM_COMPILE_TIMEOUT_S, c.one_thread)
             for c in (pair[:1] if same else pair)]
    builds = builder.build(items)
    builds = builds * 2 if same else builds
    for contender, built in zip(pair, builds, strict=True):
        if not built.ok or built.program is None:
            return PairTiming(failure=f"{contender.label} did not build: {built.message}", failed=contender.label)
    programs = tuple(replace(b.program, parameters=c.program.parameters, parameter_scope=c.program.parameter_scope)
                     for c, b in zip(pair, builds, strict=True) if b.program is not None)
    run = runner.submit(RunInput(programs[1], inputs, timeout_s=REFERENCE_TIMEOUT_S)).result()
    if not run.measured.ok:
        return PairTiming(failure=f"{second.label} did not run: {run.measured.message}", failed=second.label)
    rounds, limit = compare_budget(run.measured.median_s, 2, rounds)
    timed: list[Samples] = []
    for index in range(comparisons):
        if index:
            time.sleep(gap_s)
        compared = runner.submit_compare(CompareInput(programs, inputs, rounds, MIN_ROUND_S, limit, devices)).result()
        if not compared.ok:
            return PairTiming(failure=f"timing {first.label} and {second.label} alternately failed: "
                                      f"{compared.message}")
        if compared.wrong:
            return PairTiming(failure=f"the outputs of {first.label} and {second.label} differ")
        timed.append((tuple(compared.samples[0]), tuple(compared.samples[1])))
    return PairTiming(tuple(timed))


def majority_verdict(verdicts: Sequence[V], overturns: Callable[[V], bool]) -> tuple[V, int]:
    """The first verdict that agrees with most of them, and how many agree: what stands (a tie included) unless
    more than half of the comparisons `overturn` it."""
    overturned = sum(1 for v in verdicts if overturns(v))
    outcome = 2 * overturned > len(verdicts)
    return (next(v for v in verdicts if overturns(v) == outcome),
            overturned if outcome else len(verdicts) - overturned)


@dataclass
class ProgramVerifier:
    """Builds the user's program with each candidate and times it against the program without it: IREE's default
    build with the choices other tasks won before (`ProgramCheck.others`)."""

    target: Target
    builder: Builder
    runner: Runner
    count: int = 2
    rounds: int = 15
    seed: int = 0
    # The weights a model's programs read at run time (`UserProgram.parameters`).
    parameters: bytes = field(default=b"", repr=False)
    parameter_scope: str = "model"

    def with_weights(self, program: BuiltProgram) -> BuiltProgram:
        return replace(program, parameters=self.parameters, parameter_scope=self.parameter_scope)

    def verify(self, text: str, what: str, results: list[TaskResult], records: list[Record]) -> Verification:
        """Check each task's best candidates in the whole program; returns the verification records and, when
        two tasks or more apply a checked candidate, the whole tuned program timed against IREE's default.

        Tasks go in the order of the time their candidates promise to save, each judged against the program
        with the choices accepted so far (a resumed run's included), so the largest gain is in place before a
        smaller one is judged behind it. A task whose candidates all lost is checked once more at the end when
        other tasks' choices changed the program since: a slow untuned dispatch that IREE runs beside a task's
        hides that task's gain until it is tuned itself (measured: docs/reports/measurement_fidelity.md).
        Tasks that each promise less than the noise are judged after the others, together (`_together`).
        """
        work = {r.task.key: to_verify(records, r, self.target, self.count) for r in results}
        if not any(work.values()):
            return Verification()
        entry, inputs = program_inputs(text, what, self.seed)
        tasks = {r.task.key: r.task for r in results}
        programs = ProgramBuilds(self.builder, text, entry.name, tasks, self.with_weights)
        default = programs.build({}).result()
        if not default.ok or default.program is None:
            return Verification()
        # One timed run of the default program sizes the comparisons: rounds and the time limit.
        run = self.runner.submit(RunInput(default.program, inputs, timeout_s=REFERENCE_TIMEOUT_S)).result()
        program_s = run.measured.median_s if run.measured.ok else None
        chosen = accepted_choices(records, self.target, tasks)
        checks: list[Record] = []

        def check(task: Task) -> tuple[dict[str, Record], Record | None]:
            """Judge the task's candidates against the program with the others' choices; the winner joins them."""
            others = _without(chosen, task.key)
            verdicts = self._verify_task(task, work[task.key], others, programs, inputs, program_s)
            checks.extend(verdicts)
            if (won := best_accepted(verdicts)) is not None:
                chosen[task.key] = won
            programs.keep(chosen)
            return others, won

        saving = {r.task.key: expected_saving(r.task, work[r.task.key], records, self.target)
                  for r in results if work[r.task.key]}
        order = sorted((r.task for r in results if work[r.task.key]), key=lambda t: -saving[t.key])
        floor = TOGETHER_SHARE * estimated_program_s(results, records, self.target)
        small = [t for t in order if saving[t.key] < floor]
        small = small if len(small) >= 2 else []
        alone = [t for t in order if t not in small]
        lost: dict[str, dict[str, Record]] = {}
        for task in alone:
            others, won = check(task)
            if won is None:
                lost[task.key] = others
        if small:
            picks = {t.key: work[t.key][0] for t in small}
            verdicts = self._together(picks, {k: r for k, r in chosen.items() if k not in picks}, programs, inputs,
                                      program_s)
            checks.extend(verdicts)
            chosen.update({r.task_key: r for r in verdicts if r.program is not None and r.program.accepted})
            programs.keep(chosen)
        for task in alone:
            if task.key in lost and _identities(_without(chosen, task.key)) != _identities(lost[task.key]):
                check(task)
        final = accepted_choices([*records, *checks], self.target, tasks)
        whole = self._whole(programs, default.program, final, inputs, program_s) if len(final) >= 2 else None
        return Verification(checks, whole)

    def _whole(self, programs: ProgramBuilds, default: BuiltProgram, chosen: dict[str, Record],
               inputs: tuple[bytes, ...], program_s: float | None) -> ProgramCheck:
        """The program with every task's accepted choice (built already by `programs`, as the last baseline)
        timed against IREE's default build: each check judged one task against the others' choices, this the
        sum of them."""
        tuned = programs.build(chosen).result()
        if (failed := _unbuilt(tuned, "the tuned program", len(chosen))) is not None:
            return failed
        rounds, limit = self._budget(program_s, 2)
        compared = self._compare((default, tuned.program), inputs, rounds, limit)
        return replace(_verdict(compared, 1), others=len(chosen))

    def _together(self, picks: dict[str, Record], chosen: dict[str, Record], programs: ProgramBuilds,
                  inputs: tuple[bytes, ...], program_s: float | None, halve: bool = True) -> list[Record]:
        """One verdict for tasks each too small to judge alone: the program with all their candidates (`picks`,
        task key: record) against the program with the accepted choices (`chosen`). A losing set of two or
        more is halved once and each half judged against the same baseline, so one candidate that loses in
        the program does not sink the rest."""
        baseline = programs.build(chosen)
        tuned = programs.build({**chosen, **picks}).result()
        base = baseline.result()
        verdict = _unbuilt(base, BASELINE, len(chosen)) or _unbuilt(tuned, TUNED, len(chosen))
        if verdict is None:
            rounds, limit = self._budget(program_s, 2)
            compared = (base.program, tuned.program)
            (verdict,) = judged(self._compare(compared, inputs, rounds, limit), 1,
                                lambda _: self._compare(compared, inputs, rounds, limit))
            verdict = replace(verdict, others=len(chosen))
        if not verdict.accepted and halve and len(picks) >= 2:
            keys = list(picks)
            half = len(keys) // 2
            return [*self._together({k: picks[k] for k in keys[:half]}, chosen, programs, inputs, program_s, False),
                    *self._together({k: picks[k] for k in keys[half:]}, chosen, programs, inputs, program_s, False)]
        verdict = replace(verdict, together=len(picks))
        return [replace(record, program=verdict, timestamp=now()) for record in picks.values()]

    def _verify_task(
        self, task: Task, candidates: list[Record], others: dict[str, Record], programs: ProgramBuilds,
        inputs: tuple[bytes, ...], program_s: float | None,
    ) -> list[Record]:
        baseline = programs.build(others)
        builds = [programs.build({**others, task.key: r}).result() for r in candidates]
        base = baseline.result()
        if (failed := _unbuilt(base, BASELINE, len(others))) is not None:
            return [replace(r, program=failed, timestamp=now()) for r in candidates]
        built = [(r, b.program) for r, b in zip(candidates, builds, strict=True) if b.ok and b.program]
        checks = [replace(r, program=_unbuilt(b, TUNED, len(others)), timestamp=now())
                  for r, b in zip(candidates, builds, strict=True) if not (b.ok and b.program)]
        if built:
            compared = (base.program, *(p for _, p in built))
            rounds, limit = self._budget(program_s, len(compared))

            def again(indices: list[int]) -> CompareResult:
                return self._compare((base.program, *(compared[i] for i in indices)), inputs, rounds, limit)

            verdicts = judged(self._compare(compared, inputs, rounds, limit), len(built), again)
            checks += [replace(record, program=replace(check, others=len(others)), timestamp=now())
                       for (record, _), check in zip(built, verdicts, strict=True)]
        return checks

    def _budget(self, program_s: float | None, programs: int) -> tuple[int, float | None]:
        """Rounds and a time limit for `programs` programs of about `program_s` each (`compare_budget`); unsized
        when the default program could not be timed."""
        return (self.rounds, None) if program_s is None else compare_budget(program_s, programs, self.rounds)

    def _compare(self, programs: tuple[BuiltProgram, ...], inputs: tuple[bytes, ...], rounds: int,
                 limit: float | None) -> CompareResult:
        return self.runner.submit_compare(
            CompareInput(programs, inputs, rounds=rounds, min_round_s=MIN_ROUND_S, timeout_s=limit)).result()


@dataclass
class ProgramBuilds:
    """The user's program built with a set of task choices, each set built once: the program a task's winner
    made is the next task's baseline."""

    builder: Builder
    text: str
    function: str
    tasks: dict[str, Task]
    with_weights: Callable[[BuiltProgram], BuiltProgram]
    built: dict[str | None, Future[BuildResult]] = field(default_factory=dict)

    def build(self, choices: dict[str, Record]) -> Future[BuildResult]:
        """IREE's build of the program with `choices` (task key: record; none: IREE's default), its weights
        attached; a spec that cannot be made is a failed build."""
        try:
            spec = self.spec(choices)
        except AnsorError as exc:
            failed: Future[BuildResult] = Future()
            failed.set_result(BuildResult(None, ErrorKind.INVALID_SCHEDULE, str(exc), 0.0))
            return failed
        if spec not in self.built:
            self.built[spec] = self.builder.submit(
                ProgramBuildInput(self.text, self.function, spec, timeout_s=PROGRAM_COMPILE_TIMEOUT_S))
        return _weighted(self.built[spec], self.with_weights)

    def keep(self, choices: dict[str, Record]) -> None:
        """Forget every build but IREE's default and the program with `choices` (the next baseline): a model's
        programs are large."""
        try:
            spec = self.spec(choices)
        except AnsorError:
            spec = None
        self.built = {k: v for k, v in self.built.items() if k in (None, spec)}

    def spec(self, choices: dict[str, Record]) -> str | None:
        """The tuning spec of `choices`; None: IREE's default."""
        if not choices:
            return None
        return program_spec([(self.tasks[k], r) for k, r in sorted(choices.items())])  # one set, one text


def _weighted(build: Future[BuildResult], with_weights: Callable[[BuiltProgram], BuiltProgram]
              ) -> Future[BuildResult]:
    """`build`, its program carrying the model's weights once it is done."""
    out: Future[BuildResult] = Future()

    def done(f: Future[BuildResult]) -> None:
        result = f.result()
        out.set_result(replace(result, program=with_weights(result.program)) if result.program else result)

    build.add_done_callback(done)
    return out


BASELINE = "the program with the other tasks' choices"
TUNED = "the program"


def _unbuilt(build: BuildResult, what: str, others: int) -> ProgramCheck | None:
    """The failed check of a program (`what` names it) that did not build; None when it built."""
    if build.ok and build.program is not None:
        return None
    return ProgramCheck(0.0, 0.0, 0.0, 0.0, 0.0, 0, False, f"{what} did not build: {build.message}", others)


@dataclass(frozen=True)
class Verification:
    """What `ProgramVerifier.verify` found: the checks to append to the log, and the whole tuned program timed
    against IREE's default build (None when fewer than two tasks apply a checked candidate: one check already
    compared with IREE's default)."""

    checks: list[Record] = field(default_factory=list)
    whole: ProgramCheck | None = None


def _without(choices: dict[str, Record], key: str) -> dict[str, Record]:
    return {k: r for k, r in choices.items() if k != key}


def _identities(choices: dict[str, Record]) -> set[tuple]:
    return {r.candidate.identity for r in choices.values()}


def best_accepted(checks: Sequence[Record]) -> Record | None:
    """The accepted check with the best program speedup, as `best_records` applies it."""
    accepted = [r for r in checks if r.program is not None and r.program.accepted]
    return max(accepted, key=lambda r: r.program.ratio) if accepted else None


def accepted_choices(records: list[Record], target: Target, tasks: dict[str, Task]) -> dict[str, Record]:
    """Per task of `tasks`, the candidate an earlier check accepted and the log applies (a resumed run's
    choices are the baseline of what it checks now)."""
    best = best_records(records, target.key, target.fingerprint)
    return {k: r for k, r in best.items() if k in tasks and r.program is not None and r.program.accepted}


def expected_saving(task: Task, candidates: list[Record], records: list[Record], target: Target) -> float:
    """Seconds per program call the task's fastest candidate saves, as the task measured it: IREE's default
    time minus the candidate's, times how often the program runs the task."""
    defaults = [r.result.median_s for r in records if r.task_key == task.key and r.is_default and r.ok
                and r.program is None and for_target(r, target.key, target.fingerprint)]
    fastest = min(r.result.median_s for r in candidates)
    return task.weight * (min(defaults) - fastest) if defaults else 0.0


def estimated_program_s(results: list[TaskResult], records: list[Record], target: Target) -> float:
    """The program's time as its tasks measured it: per task, its weight times its fastest correct time."""
    best: dict[str, float] = {}
    for r in records:
        if r.program is None and r.ok and for_target(r, target.key, target.fingerprint):
            best[r.task_key] = min(best.get(r.task_key, math.inf), r.result.median_s)
    return sum(r.task.weight * best[r.task.key] for r in results if r.task.key in best)


def judged(compared: CompareResult, count: int,
           again: Callable[[list[int]], CompareResult]) -> list[ProgramCheck]:
    """The checks of programs 1..`count` of an alternated comparison (IREE's default is program 0). Those the
    noise may have decided (`inconclusive`) are compared again (`again` gets their indices and returns the
    default and them, in that order) and judged on the rounds of both comparisons."""
    verdicts = [_verdict(compared, i) for i in range(1, count + 1)]
    if not compared.ok:
        return verdicts
    samples = {i: (list(compared.samples[0]), list(compared.samples[i])) for i in range(1, count + 1)}
    for _ in range(AGAIN):
        retry = [i for i, check in enumerate(verdicts, start=1) if inconclusive(check)]
        if not retry:
            break
        more = again(retry)
        if not more.ok:
            break
        for j, i in enumerate(retry, start=1):
            samples[i][0].extend(more.samples[0])
            samples[i][1].extend(more.samples[j])
            verdicts[i - 1] = judge(*samples[i])
    return verdicts


def _verdict(compared: CompareResult, index: int) -> ProgramCheck:
    """The check of program `index` (IREE's default is program 0) in one alternated comparison."""
    if not compared.ok:
        return ProgramCheck(0.0, 0.0, 0.0, 0.0, 0.0, 0, False, compared.message)
    if index in compared.wrong:
        return ProgramCheck(0.0, 0.0, 0.0, 0.0, 0.0, 0, False, "the program's output differs from IREE's default "
                            "build")
    return judge(compared.samples[0], compared.samples[index])


def inconclusive(check: ProgramCheck, min_gain: float = MIN_GAIN) -> bool:
    """A rejected check whose median speedup clears the bar while its lower quartile does not: on a noisy host
    (2 threads on a 2-vCPU guest) the host's phases rather than the program may have decided it."""
    return not check.accepted and check.rounds > 0 and check.ratio >= 1.0 + min_gain and check.ratio_low <= 1.0


def summarize(results: list[TaskResult], records: list[Record], target: Target) -> None:
    """Per task, what the log's verdicts decide: the applied candidate's program speedup, or a fall-back to
    IREE's default when the program rejected every checked candidate."""
    best = best_records(records, target.key, target.fingerprint)
    for result in results:
        checks = [r for r in records if r.task_key == result.task.key and r.program is not None
                  and for_target(r, target.key, target.fingerprint)]
        result.verified = len(checks)
        chosen = best.get(result.task.key)
        result.applied_record = chosen
        result.program_speedup = chosen.program.ratio if chosen is not None and chosen.program else None
        result.fell_back = bool(checks) and chosen is not None and chosen.program is None
    configure_alike(results)


def configure_alike(results: list[TaskResult]) -> None:
    """Name the task whose tuning-spec entry configures each task's dispatch where it is another's
    (`spec_sources`): such a task neither falls back nor applies its own choice."""
    tuned = {r.task.key: r.applied_record for r in results
             if r.applied_record is not None and not r.applied_record.is_default}
    sources = spec_sources([r.task for r in results], {k: c.family is Family.TRANSFORM for k, c in tuned.items()})
    tasks = {r.task.key: r.task for r in results}
    for result in results:
        source = sources.get(result.task.key, result.task.key)
        if source != result.task.key:
            result.configured_by, result.fell_back = tasks[source], False
            result.applied_record, result.program_speedup = tuned[source], None


def whole_program_note(check: ProgramCheck) -> str:
    """What the user hears of the whole tuned program against IREE's default build (`Verification.whole`)."""
    if check.rounds == 0:
        return f"the tuned program with every task's choice was not timed: {check.reason}"
    line = (f"the tuned program ({check.others} tasks tuned): {check.ratio:.2f}x IREE's default build, median of "
            f"{check.rounds} alternated rounds (lower quartile {check.ratio_low:.2f}x)")
    if check.ratio < 1.0:
        line += "; slower although each task's choice won against the others': please report it with the log"
    return line


def build_gap(result: TaskResult, records: list[Record], target: Target) -> str | None:
    """A note when a task fell back to IREE's default although its checked candidates won the task by far and
    lost the program by far (`SUSPECT_TASK_GAIN`, `SUSPECT_PROGRAM_RATIO`): the two builds differ."""
    if not result.fell_back:
        return None
    mine = [r for r in records if r.task_key == result.task.key and for_target(r, target.key, target.fingerprint)]
    defaults = [r.result.median_s for r in mine if r.is_default and r.program is None and r.ok]
    checks = [r for r in mine if r.program is not None and r.program.ratio > 0 and r.ok]
    if not defaults or not checks:
        return None
    best = max(checks, key=lambda r: r.program.ratio)
    gain = min(defaults) / best.result.median_s
    if gain < SUSPECT_TASK_GAIN or best.program.ratio > SUSPECT_PROGRAM_RATIO:
        return None
    return (f"{result.task.name}: its best checked candidate ran {gain:.2f}x IREE's default as a task but "
            f"{best.program.ratio:.2f}x in the whole program built with its tuning spec, so IREE's default is "
            "used; a gap this size is no noise but a difference between the two builds: please report it with "
            "the log")


def program_spec(choices: Sequence[tuple[Task, Record]]) -> str:
    """A tuning spec applying each record's candidate to its task, as `ansor_mlir.compile` applies a log's
    best: its configuration on the root op, or its transform strategy."""
    configs = [(task, r.config) for task, r in choices if r.family is not Family.TRANSFORM]
    strategies = []
    for task, record in choices:
        if record.family is Family.TRANSFORM:
            name = strategy_name(task, record.candidate)
            strategies.append((task, name, render_strategy(record.sketch, record.candidate, task, name)))
    return render_spec(configs, strategies)

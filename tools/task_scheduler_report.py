"""Ansor's gradient task scheduler against round-robin at the same total budget, on a whole model.

Writes docs/reports/task_scheduler.md (and a PNG beside it): per scheduler, the
estimated end-to-end latency (the sum over tasks of weight x best time, from
the log, after every trial) against trials, and the measured end-to-end
latency at checkpoints: the whole model compiled with each log's best records
up to that many trials, timed alternately against IREE's default build in one
run (`Runner.submit_compare`, the machinery of whole-program verification).

    python tools/task_scheduler_report.py --model examples/models/resnet.py:resnet18 --trials 128 --batch 4 \\
        --workdir /tmp/task_scheduler --docs docs/reports/task_scheduler.md

Tuning runs resume from their logs in `--workdir`; `--only gradient` (or
round-robin) tunes just one (run both at once, then once more without
`--only` to measure and write the doc; `--no-tune` only measures and writes).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import ansor_mlir
from ansor_mlir import api
from ansor_mlir.core.affine import AffineMap
from ansor_mlir.core.target import Target
from ansor_mlir.core.task import RootOp, Task
from ansor_mlir.database.records import Record, for_target, read_records
from ansor_mlir.frontend.entry_point import entry_point
from ansor_mlir.measure.builder import BuiltProgram
from ansor_mlir.measure.inputs import encode_array, make_arrays
from ansor_mlir.measure.local_runner import LocalRunner
from ansor_mlir.measure.runner import CompareInput
from ansor_mlir.tuning.callbacks import TuningCallback
from ansor_mlir.tuning.task_result import TaskResult, estimated_latency
from ansor_mlir.tuning.task_scheduler import SCHEDULERS, GradientScheduler
from ansor_mlir.tuning.tuner import TuneOptions

ROOT = Path(__file__).resolve().parents[1]


class RoundLog(TuningCallback):
    """One JSON line per round: the run's trials, the estimated end-to-end latency, seconds since the start."""

    def __init__(self, path: Path):
        self.path = path
        self.started = time.perf_counter()

    def on_round(self, results: Sequence[TaskResult], index: int, left: int) -> None:
        row = {"task": index, "trials": sum(r.trials for r in results), "left": left,
               "estimate_s": estimated_latency(results), "elapsed_s": time.perf_counter() - self.started,
               "task_trials": [r.trials for r in results]}
        with self.path.open("a") as out:
            out.write(json.dumps(row) + "\n")


@dataclass(frozen=True)
class Run:
    scheduler: str
    log: Path
    rounds: Path
    console: Path


def runs(workdir: Path, schedulers: Sequence[str]) -> list[Run]:
    return [Run(s, workdir / f"{s}.jsonl", workdir / f"{s}.rounds.jsonl", workdir / f"{s}.console.txt")
            for s in schedulers]


def tune(model: str, run: Run, trials: int, batch: int, seed: int) -> None:
    """Tune the model with one scheduler (resuming from its log)."""
    options = TuneOptions(trials=trials, log=run.log, seed=seed, batch_size=batch, verify=0,
                          task_scheduler=run.scheduler, progress=True)
    api.tune(model, options=options, callbacks=[RoundLog(run.rounds)])


# A longer pause between two trials is a stopped run resumed later, not search time.
PAUSE_S = 300.0


def search_wall_s(records: list[Record]) -> float:
    """Seconds between consecutive search trials (after IREE's defaults), pauses of a stopped run left out."""
    times = sorted(r.timestamp for r in records if not r.is_default)
    return sum(b - a for a, b in zip(times, times[1:], strict=False) if b - a < PAUSE_S)


def estimate_curve(records: list[Record], tasks: list[Task], target: Target) -> list[tuple[int, float]]:
    """(trials, estimated end-to-end seconds) after every trial of the log, once every task has a time.

    Each task's records are counted as the tuner counts them (`TaskResult.account`), in log order.
    """
    results = {t.key: TaskResult(task=t) for t in tasks}
    curve, trials = [], 0
    for record in records:
        if (record.task_key not in results or record.program is not None
                or not for_target(record, target.key, target.fingerprint)):
            continue
        results[record.task_key].account(record)
        trials += 1
        estimate = estimated_latency(list(results.values()))
        if estimate is not None:
            curve.append((trials, estimate))
    return curve


def prefix_log(log: Path, trials: int, out: Path) -> Path:
    """The first `trials` records of a log (what the run had measured then), as a log of its own."""
    lines = [line for line in log.read_text().splitlines(keepends=True) if line.strip()]
    out.write_text("".join(lines[:trials]))
    return out


def measure(model: str, target: Target, logs: dict[str, Path], checkpoints: Sequence[int], workdir: Path,
            rounds: int, seed: int) -> dict[str, list[float]]:
    """Per program (IREE default, then `scheduler@trials`), the per-round medians of the whole model,
    all timed alternately in one run; every program's output is checked against IREE's default."""
    source = ansor_mlir.load_model(model)
    programs = {"IREE default": api.compile(source, target)}
    for scheduler, log in logs.items():
        for trials in checkpoints:
            prefix = prefix_log(log, trials, workdir / f"{scheduler}.at{trials}.jsonl")
            print(f"building the model with {scheduler}'s best records after {trials} trials", file=sys.stderr)
            programs[f"{scheduler}@{trials}"] = api.compile(source, target, prefix)
    entry = entry_point(source.text, source.name)
    inputs = tuple(encode_array(a) for a in make_arrays(entry.input_types, f"{source.name}:{seed}"))
    built = tuple(BuiltProgram(p.vmfb, p.function) for p in programs.values())
    runner = LocalRunner(target)
    try:
        compared = runner.submit_compare(CompareInput(built, inputs, rounds=rounds, min_round_s=0.2,
                                                      timeout_s=3600.0)).result()
    finally:
        runner.close()
    if not compared.ok:
        raise SystemExit(f"the comparison failed: {compared.message}")
    if compared.wrong:
        names = list(programs)
        raise SystemExit(f"wrong outputs: {', '.join(names[i] for i in compared.wrong)}")
    return {name: list(samples) for name, samples in zip(programs, compared.samples, strict=True)}


def value_at(curve: list[tuple[int, float]], trials: int) -> float | None:
    before = [v for t, v in curve if t <= trials]
    return before[-1] if before else None


def plot(path: Path, curves: dict[str, list[tuple[int, float]]], measured: dict[str, list[float]],
         checkpoints: Sequence[int], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.8))
    colors = {"gradient": "tab:blue", "round-robin": "tab:orange"}
    for scheduler, curve in curves.items():
        ax.plot([t for t, _ in curve], [v * 1e3 for _, v in curve], color=colors.get(scheduler),
                label=f"{scheduler}: estimated (sum of weight x task time)")
        points = [(t, statistics.median(measured[f"{scheduler}@{t}"]) * 1e3) for t in checkpoints
                  if f"{scheduler}@{t}" in measured]
        ax.plot([t for t, _ in points], [v for _, v in points], "o--", color=colors.get(scheduler),
                label=f"{scheduler}: measured whole model")
    default = statistics.median(measured["IREE default"]) * 1e3
    ax.axhline(default, color="gray", linestyle=":", label="IREE default, measured whole model")
    ax.set_xlabel("trials (all tasks, IREE's default of each included)")
    ax.set_ylabel("end-to-end latency (ms)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def task_trials(records: list[Record], tasks: list[Task]) -> dict[str, int]:
    keys = {t.key for t in tasks}
    counts = {t.key: 0 for t in tasks}
    for r in records:
        if r.task_key in keys and r.program is None:
            counts[r.task_key] += 1
    return counts


def pick_cost(tasks: int, trials: int, batch: int = 4, picks: int = 200) -> float:
    """Seconds per gradient-scheduler pick with `tasks` synthetic tasks of `trials` trials each."""
    import random

    rng = random.Random(0)
    maps = tuple(AffineMap.projection(3, dims) for dims in ((0, 2), (2, 1), (0, 1)))
    results = []
    for i in range(tasks):
        root = RootOp(f"kind{i % 7}", (64, 64, 64), ("parallel", "parallel", "reduction"), maps, (), "f32", 4, ())
        result = TaskResult(task=Task(f"t{i}", f"t{i}", "", "", (), (), (), root, 0, 10**6 * (1 + i % 5), 1))
        best = 1.0
        for _ in range(trials):
            best = min(best, rng.uniform(0.5, 1.0))
            result.trials += 1
            result.best_s = best
            result.best_history.append(best)
        results.append(result)
    scheduler, left = GradientScheduler(batch), [batch] * tasks
    started = time.perf_counter()
    for _ in range(picks):
        scheduler.next_task(results, left)
    return (time.perf_counter() - started) / picks


def last_round_table(console: Path) -> str:
    """The last per-round table a run printed (title, rows and caption)."""
    if not console.exists():
        return ""
    lines = console.read_text(errors="replace").splitlines()
    starts = [i for i, line in enumerate(lines) if "after a round of task" in line]
    if not starts:
        return ""
    end = next((i for i in range(starts[-1] + 1, len(lines)) if " left" in lines[i] and "trials" in lines[i]),
               starts[-1])
    return "\n".join(line.rstrip() for line in lines[starts[-1]:end + 1])


def git_commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip() or "unknown"


def report(args: argparse.Namespace, target: Target, tasks: list[Task], selected: list[Run],
           curves: dict[str, list[tuple[int, float]]], measured: dict[str, list[float]],
           logs: dict[str, list[Record]], png: Path) -> str:
    default = statistics.median(measured["IREE default"])
    argv = [{args.note: "'<the paragraph below>'", args.findings: "'<the paragraph after the table>'"}.get(a, a)
            if a in (args.note, args.findings) and a else a for a in sys.argv[1:]]
    command = " ".join(["python tools/task_scheduler_report.py", *argv])
    lines = [
        "# Task scheduler: Ansor's gradient scheduler vs round-robin",
        "",
        f"Generated by `{command}` at commit {git_commit()} on {datetime.date.today().isoformat()}; "
        f"machine: {platform.processor() or platform.machine()}, {target.cores} cores (shared with other jobs, "
        f"so absolute times are noisy: compare ratios), 1 runtime thread, CPU {target.resolved_cpu or target.cpu}.",
        "",
        f"Model `{args.model}`: {len(tasks)} tasks (unique dispatches), weights "
        f"{', '.join(str(t.weight) for t in tasks)}. Total budget {args.trials} trials per scheduler "
        f"(IREE's default of each task included: the first {args.trials} records of each log; the scheduler's "
        "decisions do not depend on the budget, so a longer run's first records are the run at this budget), "
        f"{args.batch} trials per round, seed {args.seed}, "
        "evolutionary search with the shipped cost model, no whole-program verification (the whole budget "
        "goes to the search).",
        *(["", args.note] if args.note else []),
        "",
        "**Estimated** end-to-end latency: the sum over tasks of weight x the task's best time alone (what "
        "the scheduler minimises; it leaves out the dispatches that are not tuned). **Measured**: the whole "
        "model compiled with each log's best records after that many trials and timed alternately with IREE's "
        f"default build in one run ({args.rounds} rounds, median; outputs checked against IREE's default).",
        "",
        "| scheduler | trials | estimated (ms) | estimated speedup over its IREE defaults | measured (ms) "
        "| measured speedup vs IREE default |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for run in selected:
        start = curves[run.scheduler][0]
        lines.append(f"| {run.scheduler} (IREE defaults) | {start[0]} | {start[1] * 1e3:.3f} | 1.00x | "
                     f"{default * 1e3:.3f} | 1.00x |")
        for trials in args.checkpoints:
            estimate = value_at(curves[run.scheduler], trials)
            samples = measured.get(f"{run.scheduler}@{trials}")
            program = statistics.median(samples) if samples else None
            lines.append(f"| {run.scheduler} | {trials} | {f'{estimate * 1e3:.3f}' if estimate else '-'} | "
                         f"{f'{start[1] / estimate:.2f}x' if estimate else '-'} | "
                         f"{f'{program * 1e3:.3f}' if program else '-'} | "
                         f"{f'{default / program:.2f}x' if program else '-'} |")
    lines += ["", f"![estimated and measured end-to-end latency against trials]({png.name})", ""]
    if args.findings:
        lines += [args.findings, ""]
    lines += ["Trials per task at the end of each run (the gradient scheduler's allocation):", "",
              "| task | weight | GFLOP | " + " | ".join(r.scheduler for r in selected) + " |",
              "|---|---:|---:|" + "---:|" * len(selected)]
    counts = {run.scheduler: task_trials(logs[run.scheduler], tasks) for run in selected}
    for task in tasks:
        lines.append(f"| {task.name} | {task.weight} | {task.flops / 1e9:.3f} | "
                     + " | ".join(str(counts[r.scheduler][task.key]) for r in selected) + " |")
    table = last_round_table(selected[0].console)
    if table:
        lines += ["", f"The last per-round table the {selected[0].scheduler} run printed (`progress=1`; `*` marks "
                  "the task of the round):", "", "```", table, "```"]
    costs = [(n, trials, pick_cost(n, trials)) for n, trials in ((13, 10), (23, 100), (23, 1000), (200, 100))]
    lines += ["", "Scale: the time of one gradient-scheduler pick (synthetic tasks; it reads each task's rounds, "
              "so it grows with tasks x rounds, never with the log's length beyond that): "
              + ", ".join(f"{n} tasks x {t} trials: {c * 1e3:.2f} ms" for n, t, c in costs) + ". The tuner reads "
              "only the log lines appended since its last look."]
    lines += ["", f"Wall time of the search (between consecutive search trials, pauses over {PAUSE_S / 60:.0f} min "
              "left out; `nice`d, beside other jobs on the 2 cores): "
              + ", ".join(f"{s} {search_wall_s(r) / 60:.1f} min" for s, r in logs.items()) + "."]
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="examples/models/resnet.py:resnet18")
    parser.add_argument("--trials", type=int, default=128, help="total budget per scheduler")
    parser.add_argument("--batch", type=int, default=4, help="trials per round")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoints", type=lambda s: [int(x) for x in s.split(",")], default=None,
                        help="trial counts at which the whole model is measured (default: 4 up to --trials)")
    parser.add_argument("--rounds", type=int, default=15, help="alternated timing rounds")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/task_scheduler"))
    parser.add_argument("--docs", type=Path, default=ROOT / "docs" / "reports" / "task_scheduler.md")
    parser.add_argument("--only", choices=SCHEDULERS, help="tune with this scheduler only, write nothing")
    parser.add_argument("--no-tune", action="store_true", help="measure the logs in --workdir and write the doc")
    parser.add_argument("--reuse-measured", action="store_true",
                        help="take the whole-model times from the last run's --workdir/measured.json")
    parser.add_argument("--findings", default="", help="a paragraph after the table: what the numbers show")
    parser.add_argument("--note", default="", help="a sentence for the doc (how the logs were made, when not here)")
    args = parser.parse_args(argv)
    if args.checkpoints is None:
        args.checkpoints = sorted({args.trials * k // 4 for k in range(1, 5)})
    args.workdir.mkdir(parents=True, exist_ok=True)
    target = api.resolve_target("llvm-cpu")
    selected = runs(args.workdir, [args.only] if args.only else list(SCHEDULERS))
    if not args.no_tune:
        for run in selected:
            tune(args.model, run, args.trials, args.batch, args.seed)
    if args.only:
        return 0
    logs = {r.scheduler: prefix_log(r.log, args.trials, args.workdir / f"{r.scheduler}.budget{args.trials}.jsonl")
            for r in selected}
    records = {s: read_records(log) for s, log in logs.items()}
    short = [s for s, r in records.items() if len(r) < args.trials]
    if short:
        raise SystemExit(f"{', '.join(short)}: fewer than {args.trials} records in {args.workdir}: tune first")
    tasks = [t for t in api.extract_tasks(args.model, target) if t.tunable]
    curves = {s: estimate_curve(r, tasks, target) for s, r in records.items()}
    cache = args.workdir / "measured.json"
    if args.reuse_measured and cache.exists():
        measured = json.loads(cache.read_text())
    else:
        measured = measure(args.model, target, logs, args.checkpoints, args.workdir, args.rounds, args.seed)
        cache.write_text(json.dumps(measured))
    png = args.docs.with_suffix(".png")
    plot(png, curves, measured, args.checkpoints, f"{args.model}: {args.trials} trials, {args.batch} per round")
    args.docs.write_text(report(args, target, tasks, selected, curves, measured, records, png))
    print(f"wrote {args.docs} and {png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Evolutionary search + cost model vs random search, at equal measurement budgets.

For each workload, three policies tune it (fresh logs, same seed): random
search; evolutionary search with a model trained online only from this run
(`evolutionary`); and evolutionary search starting from a model pretrained on
the dataset with this workload's tasks held out, fine-tuned online
(`pretrained`). Then:
  * the best programs each policy found within the first N trials (each
    budget of `--trials`) are rebuilt and timed alternately in one run with
    IREE's default (ratios);
  * the zero-trial mode (the held-out pretrained model, no measurement) picks
    a program, which is timed in the same alternating run;
  * the trials each policy took to reach 95% of the best it found at the
    largest budget, and its search overhead (featurize + train + evolve) as a
    share of tuning wall time.
With `--metrics FILE` (the JSON of `tools/cost_model_metrics.py`) the report
opens with the cost model's held-out metrics. Writes JSON, a PNG of
best-time-vs-trials curves and a markdown report.

    python tools/search_benchmark.py --quick
    python tools/search_benchmark.py --workloads GMM:0 TBS:0 --trials 32,64 --metrics M.json \
        --docs docs/reports/search_benchmark.md
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ansor_mlir import api
from ansor_mlir.core.target import Target, detect_host
from ansor_mlir.core.task import Task
from ansor_mlir.database.log_file import read_records
from ansor_mlir.database.measure_record import Record
from ansor_mlir.database.tuning_log import append_records
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.measure.compare import Contender, run_once, time_alternately
from ansor_mlir.mlir.iree_compiler import compile_vmfb, first_error_line
from ansor_mlir.model.cost_model import CostModel
from ansor_mlir.model.registry import make_cost_model
from ansor_mlir.tuning.progress import ConsoleProgress
from ansor_mlir.tuning.tuner import TuneOptions, Tuner

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # ansor_bench sits at the repo root, not installed
from ansor_bench.cost_model_report import markdown as metrics_markdown  # noqa: E402
from ansor_bench.datasets import TaskSamples, load_samples, training_log_cpus  # noqa: E402
from ansor_bench.model_quality import training_set  # noqa: E402
from ansor_bench.workloads import Workload, parse_workload_specs  # noqa: E402

POLICIES = ("random", "evolutionary", "pretrained")
# Share of the best time at the largest budget a policy must reach to count as there.
REACHED = 0.95
DEFAULT_WORKLOADS = ("GMM:0,1,2", "TBS:0", "CAP:1", "NRM:1", "softmax:2")
QUICK_WORKLOADS = ("GMM:0", "TBS:0")


@dataclass
class PolicyRun:
    policy: str
    wall_s: float
    search_s: float
    records: list[Record] = field(default_factory=list)


@dataclass
class WorkloadRun:
    workload: Workload
    tasks: list[Task]
    runs: dict[str, PolicyRun] = field(default_factory=dict)
    times_ms: dict[str, float] = field(default_factory=dict)
    wrong: list[str] = field(default_factory=list)


def held_out_model(run: WorkloadRun, samples: list[TaskSamples], out: Path) -> Path:
    """The model pretrained on the dataset without this workload's tasks (by key, and by source)."""
    keys = {t.key for t in run.tasks}
    kept = [s for s in samples if s.task_key not in keys and s.source != run.workload.label]
    model = make_cost_model()
    model.update(training_set(kept))
    path = out / f"model_without_{run.workload.label}.json"
    model.save(path)
    return path


def tune_policy(run: WorkloadRun, policy: str, trials: int, seed: int, out: Path, target: Target,
                pretrained: Path) -> PolicyRun:
    log = out / "logs" / f"{run.workload.label}_{policy}.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    model: str | Path | CostModel = pretrained if policy == "pretrained" else "none"
    options = TuneOptions(trials_per_task=trials, log=log, seed=seed, model=model,
                          policy="random" if policy == "random" else "evolutionary")
    tuner = Tuner(target, options, callbacks=[ConsoleProgress()])
    start = time.perf_counter()
    tuner.tune_tasks(run.tasks)
    wall = time.perf_counter() - start
    return PolicyRun(policy, wall, tuner.search_s, read_records(log))


def first_trials(records: list[Record], trials: int) -> list[Record]:
    """Each task's first `trials` records (the log is in measurement order)."""
    seen: dict[str, int] = {}
    out = []
    for record in records:
        seen[record.task_key] = seen.get(record.task_key, 0) + 1
        if seen[record.task_key] <= trials:
            out.append(record)
    return out


def build_from_records(run: WorkloadRun, records: list[Record], path: Path, target: Target) -> Path:
    log = path.with_suffix(".jsonl")
    log.unlink(missing_ok=True)
    append_records(log, records)
    tuned = api.apply_best(run.workload.mlir, log, target, run.workload.label)
    result = compile_vmfb(tuned, target.codegen_flags(), path)
    if not result.ok:
        raise AnsorError(f"{run.workload.label}: tuned module failed to build: {first_error_line(result.stderr)}")
    return path


def zero_trial_records(run: WorkloadRun, model_path: Path, out: Path, target: Target) -> list[Record]:
    """The zero-trial pick for this workload from the model pretrained without it."""
    log = out / "logs" / f"{run.workload.label}_zero_trial.jsonl"
    log.unlink(missing_ok=True)
    tuner = Tuner(target, TuneOptions(trials=0, log=log, policy="evolutionary", model=model_path,
                                      progress=False))
    return tuner.predict_tasks(run.tasks)


def curve(records: list[Record], tasks: list[Task]) -> list[float]:
    """Weighted sum over tasks of the best time so far, after each trial round (ms)."""
    per_task = {t.key: [] for t in tasks}
    for record in records:
        if record.task_key in per_task:
            per_task[record.task_key].append(record.result.median_s if record.ok else np.inf)
    length = max(len(v) for v in per_task.values())
    total = np.zeros(length)
    for task in tasks:
        best = np.minimum.accumulate(np.array(per_task[task.key] + [np.inf] * (length - len(per_task[task.key]))))
        total += task.weight * best
    return (total * 1e3).tolist()


def time_contenders(run: WorkloadRun, budgets: list[int], zero: list[Record], out: Path, target: Target) -> None:
    work = out / "builds"
    work.mkdir(parents=True, exist_ok=True)
    label = run.workload.label
    default = work / f"{label}_default.vmfb"
    result = compile_vmfb(run.workload.mlir, target.iree_default_flags(), default)
    if not result.ok:
        raise AnsorError(f"{label}: IREE default failed to build: {first_error_line(result.stderr)}")
    contenders = [Contender("IREE default", default, run.workload.func_name)]
    for policy in POLICIES:
        for budget in budgets:
            records = first_trials(run.runs[policy].records, budget)
            vmfb = build_from_records(run, records, work / f"{label}_{policy}_{budget}.vmfb", target)
            contenders.append(Contender(f"{policy}@{budget}", vmfb, run.workload.func_name))
    vmfb = build_from_records(run, zero, work / f"{label}_zero.vmfb", target)
    contenders.append(Contender("zero-trial", vmfb, run.workload.func_name))
    inputs = run.workload.inputs(0)
    reference = run.workload.reference(inputs)
    valid = []
    for contender in contenders:
        outputs = run_once(contender.vmfb, contender.function, inputs)
        if all(np.allclose(o, r, rtol=1e-3, atol=1e-3) for o, r in zip(outputs, reference, strict=True)):
            valid.append(contender)
        else:
            run.wrong.append(contender.name)
    times = time_alternately(valid, inputs, rounds=10)
    run.times_ms = {name: t * 1e3 for name, t in times.items()}


def plot_curves(runs: list[WorkloadRun], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(runs))
    rows = (len(runs) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, run in zip(axes.flat, runs, strict=False):
        for policy in POLICIES:
            y = curve(run.runs[policy].records, run.tasks)
            ax.plot(range(1, len(y) + 1), y, label=policy)
        ax.set_title(run.workload.label, fontsize=9)
        ax.set_xlabel("trials per task")
        ax.set_ylabel("best time (ms, log)")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(runs):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def geomean(values: list[float]) -> float:
    finite = [v for v in values if v and np.isfinite(v)]
    return float(np.exp(np.mean(np.log(finite)))) if finite else float("nan")


def trials_to_reach(records: list[Record], tasks: list[Task], target_ms: float) -> int | None:
    """Trials per task after which the weighted best time is within `REACHED` of `target_ms` (None: never)."""
    for i, ms in enumerate(curve(records, tasks), start=1):
        if ms * REACHED <= target_ms:
            return i
    return None


def failure_share(records: list[Record]) -> float:
    """Share of a policy's measured candidates that did not run correctly (compile, runtime or answer)."""
    measured = [r for r in records if r.result.error.value != "not_measured"]
    return sum(not r.ok for r in measured) / max(1, len(measured))


def report(runs: list[WorkloadRun], budgets: list[int], seed: int, target: Target) -> str:
    largest = budgets[-1]
    lines = [
        "## Search: the cost model against random search at equal trials",
        "",
        f"Generated by `tools/search_benchmark.py` on {datetime.date.today().isoformat()}, "
        f"machine: {platform.processor() or platform.machine()}, {target.cores} cores "
        f"(vector {target.vector_bytes * 8} bit), 1 runtime thread; seed {seed}; budgets "
        f"{', '.join(map(str, budgets))} trials per task. *evolutionary*: model trained online from this run "
        "alone; *pretrained*: model pretrained on the dataset without this workload's tasks, fine-tuned online. "
        "Times: medians of programs rebuilt from each policy's log and timed alternately in one run; ratios > 1: "
        "the model-guided policy's program is faster than random search's.",
        "",
        "| workload | tasks | IREE default (ms) | " + " | ".join(
            f"random@{b} | evo@{b} | pre@{b} | evo / random @{b} | pre / random @{b}" for b in budgets)
        + " | zero-trial (ms) | zero-trial / pre@" + str(largest) + " |",
        "|---" * (3 + 5 * len(budgets) + 2) + "|",
    ]
    ratios = {(p, b): [] for p in POLICIES[1:] for b in budgets}
    zero_vs_full, zero_vs_default = [], []
    for run in runs:
        t = run.times_ms
        cells = [run.workload.label, str(len(run.tasks)), f"{t.get('IREE default', float('nan')):.4f}"]
        for b in budgets:
            r = t.get(f"random@{b}")
            times = [t.get(f"{p}@{b}") for p in POLICIES]
            cells += [f"{x:.4f}" if x else "wrong" for x in times]
            for p, x in zip(POLICIES[1:], times[1:], strict=True):
                ratio = r / x if r and x else float("nan")
                ratios[(p, b)].append(ratio)
                cells.append(f"{ratio:.2f}x")
        z, full, default = t.get("zero-trial"), t.get(f"pretrained@{largest}"), t.get("IREE default")
        if z and full:
            zero_vs_full.append(full / z)
        if z and default:
            zero_vs_default.append(default / z)
        cells += [f"{z:.4f}" if z else "wrong", f"{full / z:.2f}x" if z and full else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [""]
    for b in budgets:
        evo, pre = geomean(ratios[("evolutionary", b)]), geomean(ratios[("pretrained", b)])
        lines.append(f"- Geomean speedup over random search at {b} trials: evolutionary **{evo:.3f}x**, "
                     f"pretrained **{pre:.3f}x**")
    lines.append(f"- Zero-trial pick against the {largest}-trial pretrained search (time ratio, 1.0 = as fast): "
                 f"geomean **{geomean(zero_vs_full):.3f}x**; against IREE's default: geomean "
                 f"**{geomean(zero_vs_default):.3f}x**, slowest {min(zero_vs_default, default=float('nan')):.3f}x")
    lines += ["", "| workload | " + " | ".join(f"trials to {int(REACHED * 100)}% ({p})" for p in POLICIES)
              + " | " + " | ".join(f"failed ({p})" for p in POLICIES) + " | " + " | ".join(
                  f"overhead ({p})" for p in POLICIES[1:]) + " |", "|---" * (1 + 3 * len(POLICIES) - 1) + "|"]
    for run in runs:
        best = min(curve(run.runs[p].records, run.tasks)[-1] for p in POLICIES)
        reach = [trials_to_reach(run.runs[p].records, run.tasks, best) for p in POLICIES]
        fails = [f"{100 * failure_share(run.runs[p].records):.0f}%" for p in POLICIES]
        overhead = [f"{100 * run.runs[p].search_s / run.runs[p].wall_s:.1f}%" for p in POLICIES[1:]]
        lines.append("| " + " | ".join([run.workload.label, *(str(r) if r else f">{largest}" for r in reach), *fails,
                                        *overhead]) + " |")
    wrong = [f"{r.workload.label}: {', '.join(r.wrong)}" for r in runs if r.wrong]
    lines += ["", f"Trials to {int(REACHED * 100)}%: per task, until the policy's best is within "
              f"{int(REACHED * 100)}% of the best any policy found in {largest} trials. Wrong answers (excluded "
              f"from timing): {'; '.join(wrong) if wrong else 'none'}.", "",
              "![best time vs trials](search_curves.png)", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="*", default=None, help="NAME:i,j ... (suite entry and shape indices)")
    parser.add_argument("--trials", default="64,200", help="comma-separated budgets per task; the last is tuned")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("search_benchmark_out"))
    parser.add_argument("--metrics", type=Path, default=None, help="tools/cost_model_metrics.py's JSON, reported first")
    parser.add_argument("--docs", type=Path, default=None, help="also write the markdown report here")
    parser.add_argument("--quick", action="store_true", help="2 small workloads, budgets 8,16")
    args = parser.parse_args(argv)
    try:
        budgets = sorted(int(x) for x in args.trials.split(","))
        specs = args.workloads or list(QUICK_WORKLOADS if args.quick else DEFAULT_WORKLOADS)
        if args.quick:
            budgets = [8, 16]
        workloads = parse_workload_specs(specs)
        target = resolve_target(detect_host())
        args.out.mkdir(parents=True, exist_ok=True)
        samples = load_samples(training_log_cpus(), detect_host(), make_cost_model().extractor)
        runs = []
        skipped = []
        for workload in workloads:
            try:
                tasks = Tuner(target, TuneOptions(progress=False)).tunable_tasks(workload.mlir, workload.label)
                run = WorkloadRun(workload, tasks)
                pretrained = held_out_model(run, samples, args.out)
                for policy in POLICIES:
                    print(f"== {workload.label}: {policy}, {budgets[-1]} trials per task", file=sys.stderr)
                    run.runs[policy] = tune_policy(run, policy, budgets[-1], args.seed, args.out, target, pretrained)
                zero = zero_trial_records(run, pretrained, args.out, target)
                print(f"== {workload.label}: timing contenders alternately", file=sys.stderr)
                time_contenders(run, budgets, zero, args.out, target)
            except Exception as exc:  # noqa: BLE001 - one broken workload must not lose the others' hours
                print(f"error: {workload.label}: {type(exc).__name__}: {exc}", file=sys.stderr)
                traceback.print_exc()
                skipped.append(f"{workload.label} ({type(exc).__name__}: {exc})")
                continue
            runs.append(run)
        if not runs:
            raise AnsorError(f"every workload failed: {'; '.join(skipped)}")
        plot_curves(runs, args.out / "search_curves.png")
        text = report(runs, budgets, args.seed, target)
        if skipped:
            text += "\nWorkloads that failed and are not in the tables: " + "; ".join(skipped) + "\n"
        if args.metrics:
            text = metrics_markdown(json.loads(args.metrics.read_text())) + "\n" + text
        command = " ".join(["python tools/search_benchmark.py", *(argv if argv is not None else sys.argv[1:])])
        text = ("# Search benchmark: the cost model and the search it guides\n\n"
                f"Regenerate: `python tools/cost_model_metrics.py --out M.json`, then `{command}`"
                f"{' (with --metrics M.json)' if args.metrics else ''}.\n\n" + text)
        (args.out / "search_benchmark.md").write_text(text)
        results = {
            "budgets": budgets,
            "workloads": [
                {"workload": r.workload.label, "times_ms": r.times_ms, "wrong": r.wrong,
                 "curves_ms": {p: curve(r.runs[p].records, r.tasks) for p in POLICIES},
                 "wall_s": {p: r.runs[p].wall_s for p in POLICIES},
                 "search_s": {p: r.runs[p].search_s for p in POLICIES}}
                for r in runs
            ],
        }
        (args.out / "search_benchmark.json").write_text(json.dumps(results, indent=1))
        if args.docs:
            args.docs.parent.mkdir(parents=True, exist_ok=True)
            args.docs.write_text(text.replace("(search_curves.png)", f"({_relative(args.out, args.docs)})"))
        print(text)
    except AnsorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _relative(out: Path, docs: Path) -> str:
    try:
        return str((out / "search_curves.png").resolve().relative_to(docs.parent.resolve()))
    except ValueError:
        return str((out / "search_curves.png").resolve())


if __name__ == "__main__":
    sys.exit(main())

"""Evolutionary search + cost model vs random search, at equal measurement budgets.

For each workload, both policies tune from scratch (fresh logs, same seed,
no pretrained model, so the model learns online only from this run). Then:
  * the best programs each policy found within the first 64 / 200 trials are
    rebuilt and timed alternately in one run with IREE's default (ratios);
  * the cost model is scored on held-out workloads (train on the others);
  * the zero-trial mode (model trained on the other workloads only, no
    measurement) picks a program, which is timed in the same alternating run;
  * search overhead (featurize + train + evolve) is reported as a share of
    tuning wall time.
Writes JSON, a PNG of best-time-vs-trials curves and a markdown report.

    python tools/search_benchmark.py --quick
    python tools/search_benchmark.py --workloads GMM:0,1,2 TBS:0 --trials 64,200 --docs docs/reports/search_benchmark.md
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ansor_mlir import api
from ansor_mlir.core.target import Target, detect_host
from ansor_mlir.core.task import Task
from ansor_mlir.database.records import Record, append_records, read_records
from ansor_mlir.database.training_data import grouped_sets, training_set
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.measure.compare import Contender, run_once, time_alternately
from ansor_mlir.mlir.iree_compiler import compile_vmfb, first_error_line
from ansor_mlir.model.cost_model import CostModel
from ansor_mlir.tuning.progress import ConsoleProgress
from ansor_mlir.tuning.tuner import TuneOptions, Tuner

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # ansor_bench sits at the repo root, not installed
from ansor_bench.model_quality import leave_one_out  # noqa: E402
from ansor_bench.workloads import Workload, parse_workload_specs  # noqa: E402

POLICIES = ("random", "evolutionary")
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


def tune_policy(run: WorkloadRun, policy: str, trials: int, seed: int, out: Path, target: Target) -> PolicyRun:
    log = out / "logs" / f"{run.workload.label}_{policy}.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    options = TuneOptions(trials_per_task=trials, log=log, seed=seed, policy=policy, model="none")
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


def zero_trial_records(run: WorkloadRun, others: list[WorkloadRun], out: Path, target: Target) -> list[Record]:
    """The zero-trial pick for this workload from a model trained on the other workloads only."""
    records = [r for o in others for p in o.runs.values() for r in p.records]
    model = CostModel()
    model.fit(training_set(records, [t for o in others for t in o.tasks], target))
    model_path = out / f"model_without_{run.workload.label}.json"
    model.save(model_path)
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


def report(runs: list[WorkloadRun], quality: list[dict], budgets: list[int], seed: int, target: Target) -> str:
    lines = [
        "# Search benchmark: evolutionary search + cost model vs random search",
        "",
        f"Generated by `tools/search_benchmark.py` on {datetime.date.today().isoformat()}, "
        f"machine: {platform.processor() or platform.machine()}, {target.cores} cores "
        f"(vector {target.vector_bytes * 8} bit), 1 runtime thread; seed {seed}. "
        "Both policies start from scratch (no pretrained model). Times: medians of programs rebuilt "
        "from each policy's log and timed alternately in one run; ratios > 1 mean the evolutionary "
        "policy's program is faster.",
        "",
        "| workload | tasks | IREE default (ms) | " + " | ".join(
            f"random@{b} | evo@{b} | evo vs random @{b}" for b in budgets) + " | zero-trial | overhead (evo) |",
        "|---" * (4 + 3 * len(budgets)) + "|---|",
    ]
    ratios = {b: [] for b in budgets}
    zero_vs_full = []
    for run in runs:
        t = run.times_ms
        cells = [run.workload.label, str(len(run.tasks)), f"{t.get('IREE default', float('nan')):.4f}"]
        for b in budgets:
            r, e = t.get(f"random@{b}"), t.get(f"evolutionary@{b}")
            ratio = r / e if r and e else float("nan")
            ratios[b].append(ratio)
            cells += [f"{r:.4f}" if r else "wrong", f"{e:.4f}" if e else "wrong", f"{ratio:.2f}x"]
        z, full = t.get("zero-trial"), t.get(f"evolutionary@{budgets[-1]}")
        if z and full:
            zero_vs_full.append(full / z)
        evo = run.runs["evolutionary"]
        cells += [f"{z:.4f} ms" if z else "wrong", f"{100 * evo.search_s / evo.wall_s:.1f}%"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [""]
    for b in budgets:
        lines.append(f"- Geomean speedup of evolutionary over random at {b} trials: **{geomean(ratios[b]):.3f}x**")
    lines.append(
        f"- Zero-trial pick vs the {budgets[-1]}-trial evolutionary result (time ratio, 1.0 = as fast): "
        f"geomean **{geomean(zero_vs_full):.3f}x**"
    )
    overhead = sum(r.runs["evolutionary"].search_s for r in runs) / sum(r.runs["evolutionary"].wall_s for r in runs)
    lines.append(f"- Search overhead of the evolutionary policy (featurize + train + evolve) over tuning wall time: "
                 f"**{100 * overhead:.1f}%**")
    wrong = [f"{r.workload.label}: {', '.join(r.wrong)}" for r in runs if r.wrong]
    lines.append(f"- Wrong answers (excluded from timing): {'; '.join(wrong) if wrong else 'none'}")
    lines += ["", "## Cost model on held-out workloads", "",
              "Trained on the records of all other workloads (both policies), tested on this one.", "",
              "| held-out workload | samples | pairwise accuracy | top-30 recall | R^2 |", "|---|---|---|---|---|"]
    for q in quality:
        lines.append(f"| {q['workload']} | {q['samples']} | {q['pairwise_accuracy']:.3f} | "
                     f"{q['top_k_recall']:.3f} | {q['r2']:.3f} |")
    if quality:
        lines.append(f"| **mean** | | {np.nanmean([q['pairwise_accuracy'] for q in quality]):.3f} | "
                     f"{np.nanmean([q['top_k_recall'] for q in quality]):.3f} | "
                     f"{np.nanmean([q['r2'] for q in quality]):.3f} |")
    lines += ["", "Ansor (OSDI'20) reports pairwise accuracy 0.851 and top-30 recall 0.624.", "",
              "![best time vs trials](search_curves.png)", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="*", default=None, help="NAME:i,j ... (suite entry and shape indices)")
    parser.add_argument("--trials", default="64,200", help="comma-separated budgets per task; the last is tuned")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("search_benchmark_out"))
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
        runs = []
        skipped = []
        for workload in workloads:
            try:
                tasks = Tuner(target, TuneOptions(progress=False)).tunable_tasks(workload.mlir, workload.label)
                run = WorkloadRun(workload, tasks)
                for policy in POLICIES:
                    print(f"== {workload.label}: {policy}, {budgets[-1]} trials per task", file=sys.stderr)
                    run.runs[policy] = tune_policy(run, policy, budgets[-1], args.seed, args.out, target)
            except Exception as exc:  # noqa: BLE001 - one broken workload must not lose the others' hours
                print(f"error: {workload.label}: {type(exc).__name__}: {exc}", file=sys.stderr)
                traceback.print_exc()
                skipped.append(f"{workload.label} ({type(exc).__name__}: {exc})")
                continue
            runs.append(run)
        if not runs:
            raise AnsorError(f"every workload failed: {'; '.join(skipped)}")
        all_records = [r for run in runs for p in run.runs.values() for r in p.records]
        groups = grouped_sets(all_records, {run.workload.label: run.tasks for run in runs}, target)
        quality = [{"workload": name, **asdict(q)} for name, q in leave_one_out(groups).items()]
        for run in runs:
            others = [o for o in runs if o is not run] or [run]
            zero = zero_trial_records(run, others, args.out, target)
            print(f"== {run.workload.label}: timing contenders alternately", file=sys.stderr)
            time_contenders(run, budgets, zero, args.out, target)
        plot_curves(runs, args.out / "search_curves.png")
        text = report(runs, quality, budgets, args.seed, target)
        if skipped:
            text += "\nWorkloads that failed and are not in the tables: " + "; ".join(skipped) + "\n"
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
            "model_quality": quality,
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

"""Train the cost model from tuning logs, and score it on held-out workloads.

Records name tasks by structural key, so the tool re-extracts the tasks of
the suite workloads (or the ones given) to featurize them. With
`--quality` it reports, per workload, a model trained on all other
workloads and tested on this one (pairwise accuracy, top-30 recall, R^2).
By default it trains on the logs `data/MANIFEST.json` lists for the shipped
model (each checked against its sha256) and writes that model, the one the
package ships as the search's warm start.

    python tools/train_cost_model.py
    python tools/train_cost_model.py --logs LOG.jsonl --workloads GMM:0 TBS:0 --quality --out /tmp/model.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ansor_mlir.core.target import Target, detect_host
from ansor_mlir.database.records import Record, read_records
from ansor_mlir.database.training_data import grouped_sets, tasks_by_module
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.target_resolution import resolve_cpu
from ansor_mlir.model.cost_model import CostModel, TrainingSet

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # ansor_bench sits at the repo root, not installed
from ansor_bench.datasets import REPO, SHIPPED_MODEL, training_log_cpus  # noqa: E402
from ansor_bench.model_quality import leave_one_out  # noqa: E402
from ansor_bench.workloads import parse_workload_specs, suite_names, suite_shapes  # noqa: E402

SHIPPED = REPO / SHIPPED_MODEL


def workload_modules(specs: list[str] | None) -> dict[str, str]:
    """Workload specs (default: every shape of every suite entry) as {label: MLIR}."""
    if not specs:
        specs = [f"{name}:{','.join(map(str, range(len(suite_shapes(name)))))}" for name in suite_names()]
    return {w.label: w.mlir for w in parse_workload_specs(specs)}


def measured_cpu(record: Record, log_cpu: str) -> str:
    """The LLVM CPU a record was measured on: its fingerprint's, else its log's manifest entry's ("" unknown).

    A fingerprint of an unresolved target names `host` (tools that tuned with `detect_host()` as is)."""
    cpu = record.fingerprint.split(":")[1] if record.fingerprint else ""
    return cpu if cpu and cpu != "host" else log_cpu


def measured_target(host: Target, cpu: str) -> Target:
    """The target a record was measured for: this host's key (records say `cpu=host`), the vector width and
    features IREE resolves `cpu` to (this host's own when ""), this host's caches.

    Features read the target (vector lanes, caches), so a log from an
    AVX-512 host featurized as this AVX2 host taught the model 8-lane
    programs that were 16-lane ones, and its micro-kernel sketches (other
    register shapes) did not replay onto this host's at all.
    """
    return host.resolved(resolve_cpu(host.backend, cpu or host.cpu, host.triple))


def training_groups(log_cpus: dict[Path, str], specs: list[str] | None, host: Target) -> dict[str, TrainingSet]:
    """Per workload, the samples of every log, each record featurized for the CPU it was measured on; a
    task's samples of each CPU are their own group (labels are throughput relative to the group's best).
    Workloads are matched as given and after each set of rewrites the records name: the suite logs tuned
    with pad-fusion hold the fused depthwise task, which the workload as given does not have."""
    by_cpu: dict[str, list[Record]] = {}
    for log, cpu in log_cpus.items():
        for record in read_records(log):
            by_cpu.setdefault(measured_cpu(record, cpu), []).append(record)
    if not by_cpu:
        raise AnsorError(f"no records in {', '.join(map(str, log_cpus))}")
    modules = workload_modules(specs)
    merged: dict[str, TrainingSet] = {}
    for cpu, records in sorted(by_cpu.items()):
        target = measured_target(host, cpu)
        rewrite_sets = {record.rewrites for record in records}
        for name, data in grouped_sets(records, tasks_by_module(modules, target, rewrite_sets), target).items():
            into = merged.setdefault(name, TrainingSet())
            for task, features, times in zip(data.tasks, data.features, data.times, strict=True):
                into.add(f"{cpu or host.cpu}/{task}", features, times)
    return {name: data for name, data in merged.items() if data.size}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", nargs="+", type=Path, default=None,
                        help=f"tuning logs (default: those data/MANIFEST.json lists as training {SHIPPED_MODEL})")
    parser.add_argument("--workloads", nargs="*", default=None, help="NAME:i,j ... (default: the whole suite)")
    parser.add_argument("--out", type=Path, default=SHIPPED)
    parser.add_argument("--quality", action="store_true", help="also score held-out workloads")
    args = parser.parse_args(argv)
    try:
        host = detect_host()
        log_cpus = {log: "" for log in args.logs} if args.logs else training_log_cpus()
        groups = training_groups(log_cpus, args.workloads, host)
        used = sum(d.size for d in groups.values())
        print(f"{used} samples match the tasks of {len(groups)} workloads (target {host.key}, "
              f"each record featurized for the CPU it was measured on)")
        if not groups:
            raise AnsorError("no record matches a task of the given workloads on this target")
        everything = TrainingSet()
        for data in groups.values():
            for task, features, times in zip(data.tasks, data.features, data.times, strict=True):
                everything.add(task, features, times)
        model = CostModel()
        model.fit(everything)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        model.save(args.out)
        print(f"wrote {args.out} (trained on {everything.size} samples of {len(everything.tasks)} tasks)")
        if args.quality:
            quality = leave_one_out(groups)
            print(f"{'held-out workload':40s} {'samples':>8s} {'pairwise':>9s} {'top-30':>7s} {'R^2':>7s}")
            for name, q in quality.items():
                print(f"{name:40s} {q.samples:8d} {q.pairwise_accuracy:9.3f} {q.top_k_recall:7.3f} {q.r2:7.3f}")
            if quality:
                mean = {}
                for f in ("pairwise_accuracy", "top_k_recall", "r2"):
                    values = np.array([getattr(q, f) for q in quality.values()])
                    mean[f] = float("nan") if np.all(np.isnan(values)) else float(np.nanmean(values))
                print(f"{'mean':40s} {'':8s} {mean['pairwise_accuracy']:9.3f} {mean['top_k_recall']:7.3f} "
                      f"{mean['r2']:7.3f}")
    except AnsorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

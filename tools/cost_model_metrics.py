"""How well the cost model ranks programs of tasks it never saw, per CPU, and what the search measured in vain.

Reads the logs data/MANIFEST.json lists for the shipped model (or `--logs`),
featurizes every record for the CPU it was measured on, and reports (see
`ansor_bench.cost_model_report`): pairwise accuracy, top-k recall, top-1
score and rank correlation on held-out shapes of seen operator kinds and on
unseen kinds, for each training objective; the featurization rate; online
fine-tuning (and, with `--cross`, across vector ISAs); compile failures per
kind; hard-limit predictions against IREE's verdicts. Featurized logs are
cached (`ANSOR_DATASET_CACHE`, default /tmp/ansor_dataset_cache).

    python tools/cost_model_metrics.py --out cost_model_metrics.json --docs cost_model_metrics.md
    python tools/cost_model_metrics.py --cross emeraldrapids,x86-64-v4:znver3
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ansor_mlir.core.target import detect_host
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.model.registry import DEFAULT_EXTRACTOR, EXTRACTORS, make_feature_extractor
from ansor_mlir.model.xgb_model import OBJECTIVES

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # ansor_bench sits at the repo root, not installed
from ansor_bench.cost_model_report import featurization_rate, markdown, measure  # noqa: E402
from ansor_bench.datasets import TASKS_FILE, load_samples, training_log_cpus  # noqa: E402
from ansor_bench.workloads import parse_workload_specs  # noqa: E402

# Workloads whose tasks the featurization rate is measured on: one of each family of loop nests.
RATE_WORKLOADS = ("GMM:2", "C2D:1", "DEP:0", "NRM:1", "softmax:2", "TBS:0", "T2D:1", "C1D:0")


def parse_cross(text: str | None) -> tuple[set[str], set[str]] | None:
    if not text:
        return None
    train, sep, test = text.partition(":")
    if not sep or not train or not test:
        raise AnsorError(f"--cross {text}: expected TRAIN_CPUS:TEST_CPUS, e.g. emeraldrapids:znver3")
    return set(train.split(",")), set(test.split(","))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", nargs="+", type=Path, default=None,
                        help="tuning logs (default: the shipped model's, from data/MANIFEST.json)")
    parser.add_argument("--dataset", nargs="*", type=Path, default=(),
                        help="dataset directories (tools/grow_dataset.py's) whose logs are added to the others")
    parser.add_argument("--extractor", choices=list(EXTRACTORS), default=DEFAULT_EXTRACTOR)
    parser.add_argument("--objectives", default=",".join(OBJECTIVES), help=f"comma-separated: {', '.join(OBJECTIVES)}")
    parser.add_argument("--cross", default=None, help="TRAIN_CPUS:TEST_CPUS for transfer across CPUs")
    parser.add_argument("--out", type=Path, default=Path("cost_model_metrics.json"))
    parser.add_argument("--docs", type=Path, default=None, help="also write the markdown report here")
    args = parser.parse_args(argv)
    try:
        objectives = tuple(o for o in args.objectives.split(",") if o)
        unknown = [o for o in objectives if o not in OBJECTIVES]
        if unknown or not objectives:
            raise AnsorError(f"--objectives: unknown {', '.join(unknown) or '(none)'}; choose among "
                             f"{', '.join(OBJECTIVES)}")
        cross = parse_cross(args.cross)
        host = detect_host()
        extractor = make_feature_extractor(args.extractor)
        log_cpus = {log.resolve(): "" for log in args.logs} if args.logs else {
            log.resolve(): cpu for log, cpu in training_log_cpus().items()}
        for directory in args.dataset:  # a log the manifest already lists keeps its entry (and counts once)
            for log in sorted(directory.resolve().glob("*.jsonl")):
                if log.name != TASKS_FILE:
                    log_cpus.setdefault(log, "")
        samples = load_samples(log_cpus, host, extractor)
        if not samples:
            raise AnsorError("no record of the logs matches a task")
        print(f"{len(samples)} task samples, {sum(len(s.times) for s in samples)} candidates", file=sys.stderr)
        target = resolve_target(host)
        rate_tasks = [t for w in parse_workload_specs(RATE_WORKLOADS)
                      for t in extract_tasks(w.mlir, target, w.label) if t.tunable]
        rate = featurization_rate(rate_tasks, target, extractor)
        results = measure(samples, extractor, objectives, cross, rate)
        args.out.write_text(json.dumps(results, indent=1))
        text = markdown(results)
        if args.docs:
            args.docs.write_text(text)
        print(text)
    except AnsorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

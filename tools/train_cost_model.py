"""Train the cost model from tuning logs: by default the one the package ships, from the logs that
data/MANIFEST.json lists for it (each checked against its sha256).

Each record is featurized for the CPU it was measured on (its fingerprint, or
its log's manifest entry), so logs of several CPUs train one model; a task's
samples of each CPU are a group of their own (labels are throughput relative
to the group's best). How well the model ranks tasks it never saw is
`tools/cost_model_metrics.py`'s to say.

    python tools/train_cost_model.py
    python tools/train_cost_model.py --logs LOG.jsonl --objective regression --out /tmp/model.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ansor_mlir.core.target import detect_host
from ansor_mlir.errors import AnsorError
from ansor_mlir.model.registry import DEFAULT_EXTRACTOR, DEFAULT_OBJECTIVE, EXTRACTORS, make_cost_model
from ansor_mlir.model.xgb_model import OBJECTIVES

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # ansor_bench sits at the repo root, not installed
from ansor_bench.datasets import REPO, SHIPPED_MODEL, load_samples, training_log_cpus  # noqa: E402
from ansor_bench.model_quality import training_set  # noqa: E402

SHIPPED = REPO / SHIPPED_MODEL


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", nargs="+", type=Path, default=None,
                        help=f"tuning logs (default: those data/MANIFEST.json lists as training {SHIPPED_MODEL})")
    parser.add_argument("--extractor", choices=list(EXTRACTORS), default=DEFAULT_EXTRACTOR)
    parser.add_argument("--objective", choices=list(OBJECTIVES), default=DEFAULT_OBJECTIVE)
    parser.add_argument("--out", type=Path, default=SHIPPED)
    args = parser.parse_args(argv)
    try:
        log_cpus = {log: "" for log in args.logs} if args.logs else training_log_cpus()
        model = make_cost_model(f"xgb-{args.objective}", args.extractor)
        samples = load_samples(log_cpus, detect_host(), model.extractor)
        if not samples:
            raise AnsorError("no record matches a task of the logs' workloads on this target")
        data = training_set(samples)
        model.update(data)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        model.save(args.out)
        hosts = sorted({s.host for s in samples})
        print(f"wrote {args.out}: {args.extractor} features, {args.objective} objective, {data.size} samples of "
              f"{len(data.tasks)} tasks measured on {', '.join(hosts)}")
    except AnsorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Measure an exported batch on the machine it was built for: needs `iree-base-runtime` and numpy, no compiler.

    python -m ansor_mlir.measure.offline_runner BATCH.zip RESULTS.jsonl [--timeout-s S] [--min-time-s S]

Every program is checked against its references and timed by the local
runner (`LocalRunner`: the same isolated timing worker, placements and
checks as tuning on this host, with the batch's thread count), one at a
time. Each result is appended to RESULTS as `{"id": ..., "result": {...}}`,
the result in the tuning log's own form, the moment it is measured; rerun
with the same RESULTS to finish a batch that was interrupted. Carry RESULTS
back and import it (`ansor-measure import BATCH RESULTS --log L.jsonl`).
Nothing imported here pulls in `iree.compiler` or the cost model.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ansor_mlir.core.gpu_target import BACKEND as CUDA_BACKEND
from ansor_mlir.core.target import Target, parse_target
from ansor_mlir.errors import AnsorError
from ansor_mlir.measure.batch_bundle import Batch, read_batch
from ansor_mlir.measure.local_runner import LocalRunner


def measured_ids(results: Path) -> set[str]:
    """Ids already in a results file (a torn last line is measured again)."""
    if not results.exists():
        return set()
    done = set()
    for line in results.read_text(encoding="utf-8").splitlines():
        try:
            done.add(str(json.loads(line)["id"]))
        except (ValueError, KeyError, TypeError):
            continue
    return done


def measure_batch(batch: Batch, results: Path, runner: LocalRunner) -> int:
    """Measure the items not yet in `results`, appending each result as it completes; returns how many."""
    todo = [item for item in batch.items if item.id not in measured_ids(results)]
    futures = [(item, runner.submit(item.run)) for item in todo]
    with results.open("a", encoding="utf-8") as out:
        for item, future in futures:
            measured = future.result().measured
            out.write(json.dumps({"id": item.id, "result": measured.to_dict()}, sort_keys=True) + "\n")
            out.flush()
    return len(todo)


def batch_target(key: str, threads: int) -> Target:
    """The target whose runtime device times a batch: a CUDA batch's (`cuda:sm_80`) is the GPU's (`cuda`);
    any CPU batch runs on this CPU with the batch's threads."""
    if key.partition(":")[0] == CUDA_BACKEND:
        return parse_target(key)
    return Target(threads=threads)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ansor_mlir.measure.offline_runner",
                                     description="Check and time an exported batch on this machine.")
    parser.add_argument("batch", type=Path, help="a batch exported by `ansor-measure export` (.zip or directory)")
    parser.add_argument("results", type=Path, help="results file to append to (JSON lines)")
    parser.add_argument("--timeout-s", type=float, default=120.0, help="limit per program run (default: 120)")
    parser.add_argument("--min-time-s", type=float, default=0.1, help="time each program at least this long")
    args = parser.parse_args(argv)
    try:
        batch = read_batch(args.batch)
        runner = LocalRunner(batch_target(batch.target, batch.threads), timeout_s=args.timeout_s,
                             min_time_s=args.min_time_s)
        with runner:
            count = measure_batch(batch, args.results, runner)
    except AnsorError as exc:
        print(f"offline_runner: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"offline_runner: error: {args.results}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"measured {count} of {len(batch.items)} programs for {batch.target}; results in {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`ansor-measure`: tune for a machine reached only by copying files.

    ansor-measure export IN.mlir -o BATCH.zip --target aarch64:neoverse-v1 --log L.jsonl [--candidates 8]
    # copy BATCH.zip to the machine; there, with only iree-base-runtime and numpy (and this package's files):
    python -m ansor_mlir.measure.offline_runner BATCH.zip RESULTS.jsonl      # or: ansor-measure run ...
    # copy RESULTS.jsonl back:
    ansor-measure import BATCH.zip RESULTS.jsonl --log L.jsonl
    ansor-opt IN.mlir --ansor-apply-best="target=aarch64:neoverse-v1 log=L.jsonl" -o OUT.mlir

Each export is one round: the cost model learns from every imported record
before it picks the next batch. Errors are one line, without a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ansor_mlir import api
from ansor_mlir.database.records import best_records, read_records
from ansor_mlir.errors import AnsorError
from ansor_mlir.measure import offline_runner


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="ansor-measure", description=__doc__.split("\n\n")[0])
    commands = top.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="build the next batch of candidates for the target machine")
    export.add_argument("input", help="linalg MLIR, .onnx or file.py:factory")
    export.add_argument("-o", "--output", type=Path, required=True, help="BATCH.zip, or a new directory")
    export.add_argument("--target", default="llvm-cpu", help="llvm-cpu (this host) or ARCH:CPU")
    export.add_argument("--threads", type=int, default=1, help="runtime threads when timing there")
    export.add_argument("--log", default="ansor_tuning.jsonl", help="tuning log (teaches the cost model)")
    export.add_argument("--candidates", type=int, default=8, help="new candidates per task (default: 8)")
    export.add_argument("--seed", type=int, default=0)
    run = commands.add_parser("run", help="measure a batch on this machine (same as the offline runner)")
    run.add_argument("batch")
    run.add_argument("results")
    imported = commands.add_parser("import", help="append a measured batch's results to the tuning log")
    imported.add_argument("batch", type=Path)
    imported.add_argument("results", type=Path)
    imported.add_argument("--log", default="ansor_tuning.jsonl")
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "run":
        return offline_runner.main([args.batch, args.results])
    try:
        if args.command == "export":
            summary = api.export_batch(args.input, args.output, args.target, args.candidates, args.log, args.seed,
                                       args.threads)
            print(f"exported {summary.programs} programs of {summary.tasks} tasks to {summary.path}"
                  + (f" ({summary.failed} candidates did not build; logged)" if summary.failed else ""))
            print(f"measure them on the target machine: python -m ansor_mlir.measure.offline_runner {summary.path} "
                  f"RESULTS.jsonl; then: ansor-measure import {summary.path} RESULTS.jsonl --log {args.log}")
            return 0
        records = api.import_results(args.batch, args.results, args.log)
        ok = sum(r.ok for r in records)
        print(f"imported {len(records)} results ({ok} correct and timed) into {args.log}")
        if records:
            target, fingerprint = records[0].target, records[0].fingerprint
            best = best_records(read_records(Path(args.log)), target, fingerprint)
            for record in sorted(best.values(), key=lambda r: r.task_name):
                time = f"{record.result.median_s * 1e3:.4g} ms" if record.ok else record.result.error.value
                print(f"  {record.task_name}: best sketch {record.candidate.sketch_index} ({record.family.value}), "
                      f"{time}")
        return 0
    except AnsorError as exc:
        print(f"ansor-measure: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""`ansor-measure`: tune for a machine reached only by copying files.

    ansor-measure export IN.mlir -o BATCH.zip --target aarch64:neoverse-v1 --log L.jsonl [--candidates 8]
    # copy BATCH.zip to the machine; there, with only iree-base-runtime and numpy (and this package's files):
    python -m ansor_mlir.measure.offline_runner BATCH.zip RESULTS.jsonl      # or: ansor-measure run ...
    # copy RESULTS.jsonl back:
    ansor-measure import BATCH.zip RESULTS.jsonl --log L.jsonl
    ansor-opt IN.mlir --ansor-apply-best="target=aarch64:neoverse-v1 log=L.jsonl" -o OUT.mlir

Each export is one round: the cost model learns from every imported record
before it picks the next batch. The log defaults to the batch's name with
`.jsonl` (`-o BATCH.zip`: `BATCH.jsonl`), for export and import alike, as
every tool names its log after its output. Errors are one line, without a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ansor_mlir import api
from ansor_mlir.cli import Parser, VersionAction, default_log, guarded, one_line_warnings
from ansor_mlir.database.records import best_records, read_records
from ansor_mlir.measure import offline_runner
from ansor_mlir.tuning.options import REWRITES_OPTION, SEED, TARGET_OPTIONS, add_arguments, given_arguments

PROG = "ansor-measure"


def parser() -> argparse.ArgumentParser:
    top = Parser(prog=PROG, description=__doc__.split("\n\n")[0], allow_abbrev=False)
    top.add_argument("--version", action=VersionAction)
    commands = top.add_subparsers(dest="command", required=True, parser_class=Parser)
    export = commands.add_parser("export", help="build the next batch of candidates for the target machine")
    export.add_argument("input", help="linalg MLIR, .onnx or file.py:factory")
    export.add_argument("-o", "--output", type=Path, required=True, help="BATCH.zip, or a new directory")
    add_arguments(export, (*TARGET_OPTIONS, REWRITES_OPTION, SEED))
    export.add_argument("--log", type=Path, help="tuning log (teaches the cost model; default: OUTPUT with the "
                                                 "suffix .jsonl)")
    export.add_argument("--candidates", type=int, default=8, help="new candidates per task (default: 8)")
    run = commands.add_parser("run", help="measure a batch on this machine (same as the offline runner)")
    run.add_argument("batch")
    run.add_argument("results")
    imported = commands.add_parser("import", help="append a measured batch's results to the tuning log")
    imported.add_argument("batch", type=Path)
    imported.add_argument("results", type=Path)
    imported.add_argument("--log", type=Path, help="tuning log (default: BATCH with the suffix .jsonl)")
    return top


def export(args: argparse.Namespace) -> int:
    log = args.log or default_log(args.output)
    given = given_arguments(args, (*TARGET_OPTIONS, REWRITES_OPTION, SEED))
    summary = api.export_batch(args.input, args.output, given.pop("target", "llvm-cpu"), candidates=args.candidates,
                               log=log, **given)
    print(f"exported {summary.programs} programs of {summary.tasks} tasks to {summary.path}"
          + (f" ({summary.failed} candidates did not build; logged in {log})" if summary.failed else ""))
    print(f"measure them on the target machine: python -m ansor_mlir.measure.offline_runner {summary.path} "
          f"RESULTS.jsonl; then: ansor-measure import {summary.path} RESULTS.jsonl --log {log}")
    return 0


def import_batch(args: argparse.Namespace) -> int:
    log = args.log or default_log(args.batch)
    records = api.import_results(args.batch, args.results, log)
    ok = sum(r.ok for r in records)
    print(f"imported {len(records)} results ({ok} correct and timed) into {log}")
    if records:
        target, fingerprint = records[0].target, records[0].fingerprint
        best = best_records(read_records(Path(log)), target, fingerprint)
        for record in sorted(best.values(), key=lambda r: r.task_name):
            time = f"{record.result.median_s * 1e3:.4g} ms" if record.ok else record.result.error.value
            print(f"  {record.task_name}: best sketch {record.candidate.sketch_index} ({record.family.value}), "
                  f"{time}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "run":
        return offline_runner.main([args.batch, args.results])

    def run() -> int:
        with one_line_warnings(PROG):
            return export(args) if args.command == "export" else import_batch(args)

    return guarded(PROG, run)


if __name__ == "__main__":
    sys.exit(main())

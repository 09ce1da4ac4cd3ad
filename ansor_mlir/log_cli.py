"""`ansor-log`: read a tuning log, or keep only what applying it needs.

    ansor-log summary tuned.jsonl                 # per task: trials, failures by kind, best, speedup
    ansor-log summary tuned.jsonl --format json
    ansor-log distill tuned.jsonl -o best.jsonl   # the best record per task and target, and the program choices

Errors are one line, without a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ansor_mlir.cli import Parser, VersionAction, guarded, one_line_warnings
from ansor_mlir.tuning.log_summary import distill_log, summarize_log, summary_table

PROG = "ansor-log"


def parser() -> argparse.ArgumentParser:
    top = Parser(prog=PROG, description=__doc__.split("\n\n")[0], allow_abbrev=False)
    top.add_argument("--version", action=VersionAction)
    commands = top.add_subparsers(dest="command", required=True, parser_class=Parser)
    summary = commands.add_parser("summary", help="per target and task: trials, failures by kind, best time, "
                                                  "speedup over IREE's default, what is applied")
    summary.add_argument("log", type=Path, help="the tuning log (.jsonl)")
    summary.add_argument("--format", choices=("table", "json"), default="table", help="(default: table)")
    distill = commands.add_parser("distill", help="write a new log with only the best record of every task per "
                                                  "target, and the latest program choices (as TVM's distill)")
    distill.add_argument("log", type=Path, help="the tuning log (.jsonl)")
    distill.add_argument("-o", dest="output", type=Path, required=True, help="the distilled log to write (new)")
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)

    def run() -> int:
        with one_line_warnings(PROG):
            if args.command == "summary":
                rows = summarize_log(args.log)
                if args.format == "json":
                    sys.stdout.write(json.dumps([r.to_dict() for r in rows], indent=2) + "\n")
                else:
                    sys.stdout.write(summary_table(rows) if rows else f"{args.log}: no records\n")
                return 0
            done = distill_log(args.log, args.output)
            print(f"{PROG}: wrote {done.path}: {done.records} records ({done.tasks} tasks) and {done.choices} "
                  f"program choices of {args.log}", file=sys.stderr)
            return 0

    return guarded(PROG, run)


if __name__ == "__main__":
    sys.exit(main())

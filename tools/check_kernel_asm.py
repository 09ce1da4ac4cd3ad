"""Check the best tuned candidates' assembly: FMAs in the hot loop, no spills, stores or gathers there, and no
spill in any other innermost loop (a panel's packing beside a clean micro-kernel).

For each task of the input with records in the log (for this target), the
`--top` fastest measured candidates are rebuilt from their traces, compiled
with IREE's executable dump, and the innermost loop with the most FMAs is
read from the x86-64 assembly (`ansor_mlir.measure.kernel_asm`), with the
count of the dispatch's other innermost loops that spill. Exits 1 when a
checked candidate's hot loop is not a micro-kernel or another loop spills
(with `--strict`).

    python tools/check_kernel_asm.py ansor_mlir/examples/matmul_bias_relu.mlir --log L.jsonl --top 3
    python tools/check_kernel_asm.py --asm dump/module_x_dispatch_0_embedded_elf_x86_64.s
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from ansor_mlir.codegen.transform_strategy import render_strategy, strategy_name
from ansor_mlir.codegen.tuning_spec import attach_configs
from ansor_mlir.core.schedule import Family
from ansor_mlir.core.target import Target, detect_host
from ansor_mlir.database.records import Record, for_target, read_records
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.kernel_asm import LoopReport, dump_assembly, hot_and_spilling
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.tuning.tuner import task_module

COLUMNS = ("fmas", "fmas_with_memory", "vector_loads", "broadcasts", "vector_stores", "stack_stores", "stack_loads",
           "gathers", "shuffles", "instructions")


def candidate_module(task, record: Record, target: Target) -> str:
    """The task's flow-level module with the record's configuration or strategy attached."""
    flow = compile_to_phase(task_module(task), target.compile_flags(), "flow", task.name)
    if record.is_default:
        return flow
    if record.family is Family.TRANSFORM:
        name = strategy_name(task, record.candidate)
        strategies = {task.key: (name, render_strategy(record.sketch, record.candidate, task, name))}
        return attach_configs(flow, {}, task.name, strategies)[0]
    return attach_configs(flow, {task.key: (record.root_index, record.config)}, task.name, {})[0]


def kernel_report(module_text: str) -> tuple[LoopReport | None, int]:
    """The hot loop over every dispatch of a module (the one with the most FMAs), and how many other innermost
    loops spill (a transpose or copy loop beside a clean micro-kernel)."""
    with tempfile.TemporaryDirectory(prefix="ansor_asm_") as tmp:
        hot, spilling = hot_and_spilling([path.read_text() for path in dump_assembly(module_text, Path(tmp))])
    return hot, len(spilling)


def row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def check_log(source: Path, log: Path, target: Target, top: int) -> list[tuple[str, LoopReport | None]]:
    text = source.read_text()
    records = [r for r in read_records(log) if for_target(r, target.key, target.fingerprint) and r.ok
               and r.program is None and r.sketch is not None]
    if not records:
        raise AnsorError(f"{log}: no measured record for target {target.key}: tune {source} for it first")
    print(row(["task", "rank", "median ms", "sketch", *COLUMNS, "other loops spilling", "micro-kernel"]))
    print(row(["---"] * (len(COLUMNS) + 6)))
    checked = []
    for task in extract_tasks(text, target, source.stem):
        fastest: dict[str, Record] = {}
        for record in sorted((r for r in records if r.task_key == task.key), key=lambda r: r.result.median_s):
            fastest.setdefault(record.candidate.identity, record)
        for rank, record in enumerate(list(fastest.values())[:top]):
            report, spilling = kernel_report(candidate_module(task, record, target))
            cells = [str(getattr(report, c)) for c in COLUMNS] if report else ["-"] * len(COLUMNS)
            clean = report is not None and report.is_micro_kernel and not spilling
            print(row([task.name, str(rank + 1), f"{record.result.median_s * 1e3:.3f}", "+".join(record.rules),
                       *cells, str(spilling), "yes" if clean else "NO"]), flush=True)
            checked.append((f"{task.name}#{rank + 1}", report if clean else None))
    return checked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", type=Path, help="the tuned MLIR input")
    parser.add_argument("--log", type=Path, help="its tuning log")
    parser.add_argument("--top", type=int, default=3, help="fastest candidates checked per task")
    parser.add_argument("--cpu", default="host", help="target CPU the log was tuned for")
    parser.add_argument("--asm", type=Path, help="check one assembly file instead")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 unless every hot loop is a micro-kernel and no other loop spills")
    args = parser.parse_args()
    try:
        if args.asm:
            report, spilling = hot_and_spilling([args.asm.read_text()])
            print(report.to_dict() if report else f"{args.asm}: no loop found")
            if spilling:
                print(f"other loops that spill: {', '.join(spilling)}")
            checked = [(str(args.asm), None if spilling else report)]
        else:
            if args.source is None or args.log is None:
                parser.error("give the tuned input and --log, or --asm FILE")
            target = resolve_target(replace(detect_host(), cpu=args.cpu))
            checked = check_log(args.source, args.log, target, args.top)
    except AnsorError as exc:
        print(f"check_kernel_asm: error: {exc}", file=sys.stderr)
        return 2
    bad = [name for name, report in checked if report is None or not report.is_micro_kernel]
    if bad:
        print(f"kernels whose hot loop is not a micro-kernel (FMAs, no spills, stores or gathers) or whose other "
              f"loops spill: {', '.join(bad)}", file=sys.stderr)
    return 1 if bad and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())

"""How far a benchmark's ratio moves with the length of its timing window; writes a doc.

    python tools/timing_window_report.py --run runs/bench [--ops GMM,softmax] [--seconds 30] [--windows 4,15]
        [--docs docs/reports/timing_windows.md]

`tools/benchmark_suite.py` times each op's contenders alternately for
`--rounds` rounds and reports ratios of medians. On a shared 2-vCPU guest the
host has phases of a few seconds in which one runtime slows and another does
not: the 2-thread AVX2 table at 9182cf3 read softmax at 0.70x PyTorch, and
the same two programs, re-timed in twelve comparisons of that length, read
0.65-1.15x (median 1.10x). This report takes a finished suite run (`--run`,
its `--out`), times each op's tuned program (on the device its build runs
on) and PyTorch alternately for `--seconds`, and reads the
ratio to PyTorch off every stretch of `--windows` seconds of those rounds
(`ansor_bench.timing.window_ratios`): the spread a comparison of that length
would show, and how often it would land below the 0.8x bar.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ansor_bench.contenders import op_args, slug  # noqa: E402
from ansor_bench.heap import keep_freed_memory  # noqa: E402
from ansor_bench.report import git_commit, run_metadata  # noqa: E402
from ansor_bench.threads import pin_threads  # noqa: E402
from ansor_bench.timing import time_alternately, warm_up_s, window_ratios  # noqa: E402
from ansor_bench.workloads import Workload, make_workload  # noqa: E402
from ansor_mlir.errors import AnsorError  # noqa: E402

ROUND_S = 0.05  # each contender's timed slice per round, as the suite's
BAR = 0.8  # issue 12's floor: no op below 0.8x PyTorch
TUNED = "ansor-mlir tuned"


def workload_of(label: str) -> Workload:
    """The suite workload a report row names, e.g. `GMM(1,128,128,128)`."""
    match = re.fullmatch(r"(\w+)\(([\d,]+)\)", label)
    if match is None:
        raise AnsorError(f"{label}: not a suite workload label like GMM(1,128,128,128)")
    return make_workload(match.group(1), [int(x) for x in match.group(2).split(",")])


def read_run(run: Path) -> dict:
    """The results of a finished suite run (its `--out` directory); AnsorError saying what to pass if not one."""
    path = run / "results.json"
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise AnsorError(f"{path}: {exc}: pass --run a finished tools/benchmark_suite.py --out") from None


def tuned_labels(results: dict, ops: set[str]) -> list[str]:
    """The run's workloads whose tuned program ran correctly (all, or those of `ops`)."""
    return [c["workload"] for c in results["cells"]
            if c["contender"] == TUNED and c["status"] == "ok" and (not ops or c["op"] in ops)]


def rounds_for(seconds: float, contenders: int) -> int:
    """Rounds of `contenders` timed slices (each after its warm-up) that take about `seconds`."""
    return max(2, math.ceil(seconds / (contenders * (ROUND_S + warm_up_s(ROUND_S)))))


def _program_call(vmfb: Path, workload: Workload, inputs: list, threads: int):
    """A timed call of a built program on the device its ABI says it was built for (a threaded build takes
    fences and runs on `local-task`; a build for one thread at threads > 1 runs on `local-sync`)."""
    from ansor_mlir.measure.vm_call import timed_call
    from ansor_mlir.mlir.iree_module import CompiledModel
    from ansor_mlir.mlir.vm_invoke import module_is_async
    from ansor_mlir.tuning.device_choice import ONE_THREAD

    built = vmfb.read_bytes()
    device = "local-task" if threads > 1 and module_is_async(built, workload.func_name) else ONE_THREAD
    program = CompiledModel(built, workload.func_name, device)
    program(*inputs)
    return timed_call(program, inputs), device


def measure_op(run: Path, label: str, threads: int, seconds: float, windows: list[float]) -> dict:
    """One op's alternated timing and the ratio to PyTorch over every window of each length."""
    from ansor_bench.torch_ops import torch_op

    workload = workload_of(label)
    inputs = workload.inputs()
    vmfbs = run / "vmfb"
    tuned, device = _program_call(vmfbs / f"{slug(workload)}.ansor.vmfb", workload, inputs, threads)
    # Only the two the ratio is of: IREE's default can take seconds a call (C3D's: 4 s), and every round waits for it.
    calls = {"tuned": tuned, "torch": torch_op(workload.name, op_args(workload), inputs, threads).call}
    timings = time_alternately(calls, rounds_for(seconds, len(calls)), ROUND_S)
    torch_rounds = timings["torch"].round_medians
    row = {"workload": label, "device": device, "rounds": len(torch_rounds),
           "ratio": timings["torch"].median_s / timings["tuned"].median_s,
           "tuned_s": timings["tuned"].median_s, "torch_s": timings["torch"].median_s, "windows": {}}
    for window in windows:
        size = min(len(torch_rounds), rounds_for(window, len(calls)))
        ratios = window_ratios(torch_rounds, timings["tuned"].round_medians, size)
        row["windows"][str(window)] = {"rounds": size, "min": min(ratios), "median": statistics.median(ratios),
                                       "max": max(ratios), "below_bar": sum(r < BAR for r in ratios) / len(ratios)}
    return row


def markdown(rows: list[dict], meta: dict, windows: list[float], run_meta: dict) -> str:
    """The doc: how it was made, then one row per op."""
    head = "| op | tuned runs on | tuned | PyTorch | ratio, whole run | " + " | ".join(
        f"{w:g} s windows: min / median / max (below {BAR}x)" for w in windows) + " |"
    lines = [
        "# How a ratio moves with the timing window",
        "",
        f"Generated by `{meta['command']}` at {meta['versions']['ansor-mlir']} on {meta['date']}. "
        "Do not edit by hand: rerun the command.",
        "",
        f"- Machine: {meta['machine']['cpu']}, {meta['machine']['logical_cpus']} logical CPUs, "
        f"{meta['machine']['os']}; {meta['threads']} thread(s) for every contender.",
        f"- Programs: the suite run `{run_meta['command']}` ({run_meta['versions']['ansor-mlir']}, "
        f"{run_meta['date']}); its `.vmfb` files, re-timed here.",
        "- Each op: the tuned program and PyTorch timed alternately (`ansor_bench.timing`, "
        f"{int(ROUND_S * 1e3)} ms slices after a warm-up); ratios are PyTorch's time over the tuned program's. "
        "A window's ratio is the ratio of the medians of its rounds (`window_ratios`); windows slide by one "
        "round.",
        "",
        head,
        "|" + " --- |" * (5 + len(windows)),
    ]
    for row in rows:
        cells = [row["workload"], row["device"], f"{row['tuned_s'] * 1e6:.1f} us", f"{row['torch_s'] * 1e6:.1f} us",
                 f"{row['ratio']:.2f}x"]
        for window in windows:
            w = row["windows"][str(window)]
            cells.append(f"{w['min']:.2f} / {w['median']:.2f} / {w['max']:.2f} ({w['below_bar']:.0%})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", type=Path, required=True, help="a finished tools/benchmark_suite.py --out directory")
    p.add_argument("--ops", default="", help="comma-separated suite entries (default: every op tuned in the run)")
    p.add_argument("--seconds", type=float, default=30.0, help="alternated timing per op")
    p.add_argument("--windows", default="4,15", help="comma-separated window lengths in seconds")
    p.add_argument("--docs", type=Path, default=None, help="write the markdown report here")
    args = p.parse_args(argv)
    try:
        results = read_run(args.run)
        windows = [float(w) for w in args.windows.split(",") if w]
    except AnsorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError:
        print(f"error: --windows {args.windows}: expected seconds like 4,15", file=sys.stderr)
        return 2
    labels = tuned_labels(results, {o for o in args.ops.split(",") if o})
    if not labels or not windows or args.seconds <= max(windows):
        print(f"error: nothing to time: {len(labels)} tuned ops in {args.run} for --ops {args.ops or 'all'}, "
              "or --seconds not above the longest window", file=sys.stderr)
        return 2
    threads = results["meta"]["threads"]
    # As the suite does, before PyTorch's pools start. PyTorch's C2D once read about 3x its suite time here (6.3
    # against 2.1 ms, Zen 3, 2 threads) with or without the pins; the likely cause, not re-measured on Zen 3, is
    # its 3.2 MB output mapped afresh on every call, which `keep_freed_memory` rules out (`ansor_bench/heap.py`).
    pin_threads(threads)
    keep_freed_memory()
    if threads > 1:
        import iree.runtime as rt

        from ansor_mlir.core.target import Target

        rt.flags.parse_flags(*Target(threads=threads).runtime_flags())
    rows = []
    for label in labels:
        try:
            rows.append(measure_op(args.run, label, threads, args.seconds, windows))
        except (AnsorError, OSError) as exc:
            print(f"error: {label}: {exc}", file=sys.stderr)
            return 1
        row = rows[-1]
        print(f"{label}: {row['ratio']:.2f}x PyTorch; " + "; ".join(
            f"{w}s windows {v['min']:.2f}-{v['max']:.2f}" for w, v in row["windows"].items()), flush=True)
    command = "python tools/timing_window_report.py " + " ".join(sys.argv[1:] if argv is None else argv)
    meta = run_metadata(command, {"seconds": args.seconds, "windows": windows}, ROOT, threads)
    if args.docs:
        args.docs.write_text(markdown(rows, meta, windows, results["meta"]))
        print(f"wrote {args.docs} ({git_commit(ROOT)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

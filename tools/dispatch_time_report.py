"""How much of a tuned program's call is its kernels and how much is IREE's per-call cost; writes a doc.

    python tools/dispatch_time_report.py --run runs/bench [--ops GMM] [--repeat 50] [--seconds 20]
        [--docs docs/reports/dispatch_time.md]

A small op's share of the peak is read off its whole call, and on a 20 us
call IREE's per-call floor (argument checks, the output's allocation, the
command buffer's submission and wait: 2-3 us on local-sync) costs several
points whatever the kernel does. This report takes a finished one-thread
suite run (`--run`, its `--out`), rebuilds each op's tuned program from the
run's log twice, as the suite built it and with IREE's
`--iree-hal-benchmark-dispatch-repeat-count=R` (every dispatch recorded R
times in the call), and times both alternately with PyTorch and with the
peak's FMA kernel (`ansor_bench.roofline.peak_call`).
The kernels' time per call is the slope, (t_R - t_1) / (R - 1); the rest of
t_1 is the call's own cost, and the first run's cache misses with it (the
repeats find the operands the first one loaded). Every share of the peak here
is against the FMA kernel's median over the same rounds: the peak in the
program's conditions. A matmul is also timed beside hand-written C
micro-kernels of the register tiles the search offers for it
(`ansor_bench.c_microkernels`): how far its kernels are from what a plain
BLAS-style kernel reaches on this host, not only from the peak.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ansor_bench.heap import keep_freed_memory  # noqa: E402
from ansor_bench.threads import pin_threads  # noqa: E402

pin_threads(1)  # before numpy's OpenBLAS starts its pool, as the suite does: every contender on one thread
keep_freed_memory()  # as the suite does: no contender's output is a fresh mmap on some calls and not on others

from timing_window_report import read_run, tuned_labels, workload_of  # noqa: E402

from ansor_bench.c_microkernels import MicroKernel, matmul_kernels  # noqa: E402
from ansor_bench.contenders import op_args, slug  # noqa: E402
from ansor_bench.report import run_metadata  # noqa: E402
from ansor_bench.roofline import PEAK_CALL_FLOPS, PeakCall, peak_call  # noqa: E402
from ansor_bench.suite import rounds_peak_flops  # noqa: E402
from ansor_bench.timing import time_alternately, warm_up_s  # noqa: E402
from ansor_bench.workloads import Workload  # noqa: E402
from ansor_mlir.errors import AnsorError  # noqa: E402

ROUND_S = 0.05  # each contender's timed slice per round, as the suite's
REPEAT_FLAG = "--iree-hal-benchmark-dispatch-repeat-count"


def kernel_seconds(single_s: float, repeated_s: float, repeat: int) -> float:
    """The kernels' time per call: what each of the `repeat - 1` extra recordings of every dispatch added."""
    return (repeated_s - single_s) / (repeat - 1)


def _build(workload: Workload, inputs: list, run: Path, target, rewrites: str, flags: tuple[str, ...]):
    """The op's tuned program rebuilt from the run's log (`ansor_mlir.compile`, as the suite's check builds it),
    with extra iree-compile `flags`, as a timed call on one thread."""
    from ansor_mlir import api
    from ansor_mlir.measure.vm_call import timed_call

    program = api.compile(workload.mlir, target=replace(target, extra_flags=flags),
                          log=run / "logs" / f"{slug(workload)}.jsonl", name=workload.label, rewrites=rewrites)
    program(*inputs)
    return timed_call(program, inputs)


def hand_written(workload: Workload, inputs: list, target, workdir: Path) -> list[MicroKernel]:
    """For a matmul (the suite's GMM), C micro-kernels of every register tile the search offers for it on
    `target` (`micro_kernel.register_shapes`), on the program's inputs; [] for other ops."""
    if workload.name != "GMM":
        return []
    from ansor_mlir.space.micro_kernel import register_shapes

    m, n = inputs[0].shape[1], inputs[1].shape[2]
    shapes = list(register_shapes(m, n, target, inputs[0].itemsize, peel=True))
    return matmul_kernels(workdir, inputs[0], inputs[1], shapes, target.vector_lanes(inputs[0].itemsize) * 4)


def measure_op(run: Path, label: str, target, rewrites: str, repeat: int, seconds: float, peak: PeakCall,
               workdir: Path) -> dict:
    """One op: the tuned call, its kernels' share, PyTorch, the peak kernel and (a matmul) hand-written
    micro-kernels, timed alternately."""
    from ansor_bench.torch_ops import torch_op

    workload = workload_of(label)
    inputs = workload.inputs()
    try:
        torch_call = torch_op(workload.name, op_args(workload), inputs, 1).call
    except ImportError:
        raise AnsorError("PyTorch is not installed, and the report times it beside the program: "
                         "pip install torch==2.13.0") from None
    except KeyError:
        raise AnsorError(f"{label}: no PyTorch form of this op to time beside it") from None
    calls = {"call": _build(workload, inputs, run, target, rewrites, ()),
             "repeated": _build(workload, inputs, run, target, rewrites, (f"{REPEAT_FLAG}={repeat}",)),
             "torch": torch_call, "peak": peak.call}
    kernels = hand_written(workload, inputs, target, workdir)
    calls.update({f"c {kernel.shape}": kernel.call for kernel in kernels})
    per_round = len(calls) * (ROUND_S + warm_up_s(ROUND_S))
    timings = time_alternately(calls, max(2, math.ceil(seconds / per_round)), ROUND_S)
    peak_flops = rounds_peak_flops(peak, timings["peak"], threads=1)
    call_s = timings["call"].median_s
    kernel_s = kernel_seconds(call_s, timings["repeated"].median_s, repeat)

    def share(s: float) -> float:
        return 100.0 * workload.flops / s / peak_flops

    return {"workload": label, "rounds": len(timings["call"].round_medians), "peak_gflops": peak_flops / 1e9,
            "peak_best_gflops": peak.flops / timings["peak"].min_s / 1e9, "call_s": call_s, "kernel_s": kernel_s,
            "overhead_s": call_s - kernel_s, "torch_s": timings["torch"].median_s, "call_pct": share(call_s),
            "kernel_pct": share(kernel_s), "torch_pct": share(timings["torch"].median_s),
            "hand_written": [{"shape": kernel.shape, "s": timings[f"c {kernel.shape}"].median_s,
                              "pct": share(timings[f"c {kernel.shape}"].median_s)} for kernel in kernels]}


def markdown(rows: list[dict], meta: dict, run_meta: dict, repeat: int, peak_method: str) -> str:
    """The doc: how it was made, then one row per op."""
    lines = [
        "# A tuned call: its kernels and IREE's per-call cost",
        "",
        f"Generated by `{meta['command']}` at {meta['versions']['ansor-mlir']} on {meta['date']}. "
        "Do not edit by hand: rerun the command.",
        "",
        f"- Machine: {meta['machine']['cpu']}, {meta['machine']['logical_cpus']} logical CPUs, "
        f"{meta['machine']['os']}; one thread (`local-sync`, PyTorch 1 thread).",
        f"- Programs: rebuilt from the logs of the suite run `{run_meta['command']}` "
        f"({run_meta['versions']['ansor-mlir']}, {run_meta['date']}).",
        f"- Kernels: the same program built with `{REPEAT_FLAG}={repeat}` records every dispatch {repeat} times "
        f"in the call; kernels per call = (t_{repeat} - t_1) / {repeat - 1}, and the call's own cost is t_1 minus "
        "that, with the first run's cache misses (the repeats find the operands the first one loaded).",
        f"- Peak: {peak_method}, {PEAK_CALL_FLOPS / 1e6:.0f} MFLOP a call, "
        f"timed alternately with the programs and PyTorch ({int(ROUND_S * 1e3)} ms slices after a warm-up, "
        "`ansor_bench.timing`); its median over the same rounds, with its fastest call beside it.",
        "",
        "| op | rounds | peak, median (fastest call) | tuned call | its kernels | call's own cost | PyTorch | "
        "% of peak: call / kernels / PyTorch |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {row['workload']} | {row['rounds']} | {row['peak_gflops']:.1f} ({row['peak_best_gflops']:.1f}) "
            f"GFLOP/s | {row['call_s'] * 1e6:.1f} us | {row['kernel_s'] * 1e6:.1f} us | "
            f"{row['overhead_s'] * 1e6:.1f} us | {row['torch_s'] * 1e6:.1f} us | "
            f"{row['call_pct']:.1f}% / {row['kernel_pct']:.1f}% / {row['torch_pct']:.1f}% |")
    return "\n".join(lines + hand_written_section(rows)) + "\n"


def hand_written_section(rows: list[dict]) -> list[str]:
    """The matmuls' hand-written micro-kernels beside the tuned program's kernels, same rounds."""
    rows = [row for row in rows if row["hand_written"]]
    if not rows:
        return []
    lines = [
        "",
        "## Hand-written micro-kernels",
        "",
        "A matmul's tuned kernels against C kernels of each register tile the search offers on this target "
        "(`ansor_bench/c_microkernels.py`: the `MR x NR` accumulators in registers across the whole reduction, row "
        "tiles outer, column tiles inner, leftover rows in a tile of their own, the shape compiled in, "
        "`gcc -O3 -march=native`), on the same inputs (copied to staggered offsets modulo 4 KiB, so that no run "
        "places them where their loads and stores alias), timed in the same rounds. They are what a BLAS "
        "micro-kernel does without packing or prefetching, and they pay no IREE call: a tuned kernel near the best "
        "of them falls short of the peak for the reasons a hand-written kernel does.",
        "",
        "| op | tuned kernels | " + " | ".join(f"C {k['shape']}" for k in rows[0]["hand_written"]) + " |",
        "| --- | --- | " + " | ".join("---" for _ in rows[0]["hand_written"]) + " |",
    ]
    for row in rows:
        cells = [f"{k['s'] * 1e6:.1f} us ({k['pct']:.1f}%)" for k in row["hand_written"]]
        lines.append(f"| {row['workload']} | {row['kernel_s'] * 1e6:.1f} us ({row['kernel_pct']:.1f}%) | "
                     + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", type=Path, required=True, help="a finished one-thread tools/benchmark_suite.py --out")
    p.add_argument("--ops", default="GMM", help="comma-separated suite entries tuned in the run (default: GMM)")
    p.add_argument("--repeat", type=int, default=50, help="recordings of every dispatch in the repeated build")
    p.add_argument("--seconds", type=float, default=20.0, help="alternated timing per op")
    p.add_argument("--docs", type=Path, default=None, help="write the markdown report here")
    args = p.parse_args(argv)
    try:
        results = read_run(args.run)
    except AnsorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if results["meta"].get("threads", 1) != 1:
        print(f"error: {args.run} ran at {results['meta']['threads']} threads: this report reads one-thread runs",
              file=sys.stderr)
        return 2
    if args.repeat < 2:
        print(f"error: --repeat {args.repeat}: at least 2 recordings are needed for a slope", file=sys.stderr)
        return 2
    from ansor_mlir.core.target import detect_host

    ops = {o for o in args.ops.split(",") if o}
    labels = tuned_labels(results, ops)
    if not labels:
        print(f"error: no op of {args.ops} ran tuned in {args.run}", file=sys.stderr)
        return 2
    target, rewrites = detect_host(threads=1), results["meta"]["budgets"]["rewrites"]
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="ansor_peak_") as tmp:
            peak = peak_call(Path(tmp), PEAK_CALL_FLOPS)  # loaded: the library outlives its file
        if peak is None:
            raise AnsorError("no C compiler for the peak's FMA kernel: install gcc")
        for label in labels:
            with tempfile.TemporaryDirectory(prefix="ansor_kernels_") as tmp:
                row = measure_op(args.run, label, target, rewrites, args.repeat, args.seconds, peak, Path(tmp))
            rows.append(row)
            print(f"{label}: call {row['call_s'] * 1e6:.1f} us ({row['call_pct']:.1f}% of peak), kernels "
                  f"{row['kernel_s'] * 1e6:.1f} us ({row['kernel_pct']:.1f}%), call's own cost "
                  f"{row['overhead_s'] * 1e6:.1f} us; PyTorch {row['torch_s'] * 1e6:.1f} us "
                  f"({row['torch_pct']:.1f}%); peak {row['peak_gflops']:.1f} GFLOP/s")
            for kernel in row["hand_written"]:
                print(f"  C micro-kernel {kernel['shape']}: {kernel['s'] * 1e6:.1f} us ({kernel['pct']:.1f}%)")
    except AnsorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.docs:
        command = "python tools/dispatch_time_report.py " + " ".join(sys.argv[1:] if argv is None else argv)
        meta = run_metadata(command, {"repeat": args.repeat, "seconds": args.seconds}, ROOT, 1)
        args.docs.write_text(markdown(rows, meta, results["meta"], args.repeat, peak.method))
        print(f"wrote {args.docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

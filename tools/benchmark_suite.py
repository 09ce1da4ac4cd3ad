"""Benchmark the Ansor paper suite (batch 1, one thread): ansor-mlir tuned vs IREE, PyTorch, numpy, TVM, Halide.

    python tools/benchmark_suite.py --shapes first --trials 32 --docs docs/reports/benchmarks.md
    python tools/benchmark_suite.py --quick --ops GMM --contenders iree,numpy   # smoke run

Writes results.csv, results.json and PNG plots to --out, prints tables, and
with --docs renders the markdown report (plots and data copied next to it).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import warnings
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # ansor_bench sits at the repo root, not installed

from ansor_bench.heap import keep_freed_memory  # noqa: E402
from ansor_bench.threads import pin_threads  # noqa: E402


def parse_shapes(text: str) -> str | list[int]:
    """`first`, `all`, or comma-separated indices into each op's shape list."""
    if text in ("first", "all"):
        return text
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shapes: expected first, all or indices like 0,2; got {text!r}") from None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", default="", help="comma-separated suite entries (default: all), e.g. GMM,C2D")
    p.add_argument("--shapes", type=parse_shapes, default="first", help="first | all | indices, e.g. 0,2")
    p.add_argument("--shape", action="append", default=[],
                   help="explicit shape row for one op, e.g. GMM=1,64,64,64 (repeatable; overrides --shapes)")
    p.add_argument("--trials", type=int, default=32, help="ansor-mlir trials per task")
    p.add_argument("--tvm-trials", type=int, default=None, help="TVM MetaSchedule trials per op (default: --trials)")
    p.add_argument("--contenders", default="",
                   help="comma-separated keys: ansor,iree,iree-rw,iree-dt,iree-uk,torch,numpy,tvm,halide "
                        "(iree-rw: IREE default on the program after ansor-mlir's program rewrites; "
                        "halide: Halide's Adams2019 autoscheduler)")
    p.add_argument("--quick", action="store_true", help="smoke run: fewer timing rounds, quick roofline")
    p.add_argument("--rounds", type=int, default=None,
                   help="alternating timing rounds (default 40: longer than the host's phases, see "
                        "tools/timing_window_report.py; quick 3)")
    p.add_argument("--out", type=Path, default=Path("runs/bench"), help="output directory")
    p.add_argument("--docs", type=Path, default=None,
                   help="also write this markdown report (e.g. docs/reports/benchmarks.md)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1,
                   help="threads of every contender: IREE's task workers, PyTorch, BLAS, TVM, Halide (default 1)")
    p.add_argument("--rewrites", default=None,
                   help="ansor-mlir's program rewrites (its rewrites= option; default: its default set), e.g. "
                        "phase-decomposition+channels-last+pad-fusion")
    p.add_argument("--guest-halt-poll-ns", type=int, default=None, metavar="NS",
                   help="in a VM guest with the haltpoll cpuidle driver, let idle vCPUs poll NS ns before halting "
                        "for this run, restored after (needs root; Linux's default is 200000): "
                        "see ansor_mlir/measure/idle_wakeup.py")
    return p


def pick_workloads(args: argparse.Namespace):
    from ansor_bench.workloads import make_workload, suite_names, suite_shapes
    from ansor_mlir.errors import AnsorError

    if args.shape:
        rows = []
        for spec in args.shape:
            name, _, values = spec.partition("=")
            try:
                rows.append(make_workload(name, [int(v) for v in values.split(",")]))
            except ValueError:
                raise AnsorError(f"--shape {spec!r}: expected NAME=int,int,...") from None
        return rows
    names = [n for n in args.ops.split(",") if n] or suite_names()
    workloads = []
    for name in names:
        shapes = suite_shapes(name)
        picked = shapes[:1] if args.shapes == "first" else shapes if args.shapes == "all" else [
            shapes[i] for i in args.shapes if i < len(shapes)]
        workloads.extend(make_workload(name, s) for s in picked)
    return workloads


def one_line_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                     line: str | None = None) -> str:
    """A library warning as the suite's other notes read: one line, without the source line that raised it."""
    return f"warning: {message}\n"


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    pin_threads(max(1, args.threads))
    heap_kept = keep_freed_memory()
    warnings.formatwarning = one_line_warning
    from rich.console import Console

    from ansor_mlir.errors import AnsorError
    from ansor_mlir.measure.idle_wakeup import (
        LINUX_DEFAULT_HALT_POLL_NS,
        halt_poll_window,
        read_idle_wakeup,
        threaded_timing_note,
    )

    console = Console(stderr=True)
    if args.guest_halt_poll_ns is not None and args.guest_halt_poll_ns < 0:
        console.print("[red]error[/]: --guest-halt-poll-ns must be >= 0 "
                      f"(Linux's default is {LINUX_DEFAULT_HALT_POLL_NS})")
        return 2
    with ExitStack() as stack:
        if args.guest_halt_poll_ns is not None:
            try:
                stack.enter_context(halt_poll_window(args.guest_halt_poll_ns))
            except AnsorError as exc:
                console.print(f"[red]error[/]: {exc}")
                return 2
        idle = read_idle_wakeup()
        warning = threaded_timing_note(args.threads, idle)
        if warning is not None:
            # The window is only an option under the haltpoll driver (`halt_poll_window` refuses it otherwise).
            option = f", or pass --guest-halt-poll-ns {LINUX_DEFAULT_HALT_POLL_NS} for this run" if idle.polls else ""
            console.print(f"[yellow]warning[/]: {warning}{option}")
        return _run(args, argv, console, idle.text(), heap_kept)


def _run(args: argparse.Namespace, argv: list[str] | None, console: Console, idle_text: str,
         heap_kept: bool) -> int:
    """The benchmark proper, under the idle wake-up setting `main` chose."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ansor_bench import report as rep
    from ansor_bench.call_floor import floor_text, lowest, measure_call_floors
    from ansor_bench.contenders import Settings, select_contenders
    from ansor_bench.roofline import PEAK_CALL_FLOPS, measure_roofline, peak_call
    from ansor_bench.suite import DEFAULT_ROUNDS, TimingPlan, rescored, run_workload
    from ansor_mlir.core.fma_throughput import peak_check, reported_clock_hz
    from ansor_mlir.core.target import detect_host
    from ansor_mlir.errors import AnsorError
    from ansor_mlir.frontend.program_rewrites import DEFAULT_REWRITES, parse_rewrites
    from ansor_mlir.frontend.target_resolution import resolve_target

    out_dir: Path = args.out
    try:
        workloads = pick_workloads(args)
        contenders = select_contenders([c for c in args.contenders.split(",") if c])
    except AnsorError as exc:
        console.print(f"[red]error[/]: {exc}")
        return 2
    if args.trials < 1 or args.threads < 1:
        console.print("[red]error[/]: --trials and --threads must be >= 1")
        return 2
    rewrites = args.rewrites or DEFAULT_REWRITES
    try:
        parse_rewrites(rewrites)
    except ValueError as exc:
        console.print(f"[red]error[/]: --rewrites {args.rewrites}: {exc}")
        return 2
    target = detect_host(threads=args.threads)
    if target.runtime_flags():
        import iree.runtime as rt

        rt.flags.parse_flags(*target.runtime_flags())  # before the first device: IREE's worker count
    plan = TimingPlan(rounds=args.rounds or (3 if args.quick else DEFAULT_ROUNDS),
                      min_round_s=0.02 if args.quick else 0.05)
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = Settings(target, args.trials, args.tvm_trials or args.trials, out_dir.resolve(), args.seed,
                        args.threads, rewrites)
    console.print("measuring this machine's roofline (1 thread)...")
    roofline = measure_roofline(target.l3_bytes, quick=args.quick, caches=(target.l2_bytes, target.l3_bytes))
    floors = measure_call_floors(target, out_dir, plan.rounds, plan.min_round_s)
    peak = peak_call(out_dir / "peak", PEAK_CALL_FLOPS)  # timed in every op's rounds (`run_workload`)
    cells, curves = [], []
    with Progress(TextColumn("[bold]benchmark"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.description}"), TimeElapsedColumn(), console=console) as progress:
        bar = progress.add_task("", total=len(workloads))
        for workload in workloads:
            c, k = run_workload(workload, contenders, settings, roofline, plan,
                                lambda text: progress.update(bar, description=text), peak)
            cells += c
            curves += k
            progress.advance(bar)
    # Measure the limits again once the contenders are done: on a shared machine the first
    # measurement may have run under load, and a limit is a maximum.
    console.print("measuring the roofline again (1 thread)...")
    roofline = roofline.best_with(
        measure_roofline(target.l3_bytes, quick=args.quick, caches=(target.l2_bytes, target.l3_bytes)))
    roofline = roofline.scaled(args.threads)
    floors = lowest(floors, measure_call_floors(target, out_dir, plan.rounds, plan.min_round_s))
    by_label = {w.label: w for w in workloads}
    cells = [rescored(c, by_label[c.workload], roofline) for c in cells]
    shapes = ";".join(args.shape) if args.shape else args.shapes if isinstance(args.shapes, str) else ",".join(
        map(str, args.shapes))
    budgets = {"trials": settings.trials, "tvm_trials": settings.tvm_trials, "shapes": shapes,
               "rewrites": settings.rewrites,
               "rounds": plan.rounds, "min_round_ms": int(plan.min_round_s * 1e3),
               "warm_ms": plan.warm_up_s * 1e3, "idle_pools": True}
    command = "python tools/benchmark_suite.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    meta = rep.run_metadata(command, budgets, REPO, args.threads)
    meta["machine"]["idle_wakeup"] = idle_text
    meta["heap_kept"] = heap_kept
    resolved = resolve_target(target)
    meta["peak_check"] = peak_check(resolved.resolved_cpu, roofline.peak_flops / args.threads,
                                    reported_clock_hz(), resolved.cpu_features)
    meta["call_floor"] = floor_text(floors)
    report = rep.BenchReport(meta, roofline,
                             [c.name for c in contenders], [w.label for w in workloads], cells, curves)
    rep.write_csv(report, out_dir / "results.csv")
    rep.write_json(report, out_dir / "results.json")
    plots = rep.write_plots(report, out_dir)
    out = Console(width=200)
    out.print(rep.console_table(report))
    out.print(rep.geomean_table(report))
    out.print(f"peak {roofline.peak_flops / 1e9:.1f} GFLOP/s ({roofline.peak_method}); "
              f"bandwidth {roofline.bandwidth_bytes_s / 1e9:.1f} GB/s ({roofline.bandwidth_method})")
    if meta["call_floor"]:
        out.print(f"IREE's per-call floor: {meta['call_floor']}")
    if args.docs:
        docs_data = args.docs.parent / args.docs.stem  # each report its own data: docs/X.md, docs/X/
        docs_data.mkdir(parents=True, exist_ok=True)
        if docs_data.resolve() != out_dir.resolve():
            for path in [out_dir / "results.csv", out_dir / "results.json", *plots]:
                shutil.copy2(path, docs_data / path.name)
        args.docs.write_text(rep.render_markdown(report, [docs_data / p.name for p in plots], args.docs))
        console.print(f"wrote {args.docs} and {docs_data}/")
    console.print(f"results in {out_dir}/ (results.csv, results.json, {len(plots)} plots)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

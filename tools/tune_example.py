"""The main job on a bundled example: tune it, then time tuned vs IREE default (and numpy) alternately.

    python tools/tune_example.py [--example matmul_bias_relu] [--trials 32] [--cluster tcp://HOST:8786]

One thread for every contender: IREE's local-sync device, and numpy's BLAS
pinned before numpy starts its pool.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ansor_bench.heap import keep_freed_memory  # noqa: E402
from ansor_bench.threads import pin_threads  # noqa: E402

pin_threads()
keep_freed_memory()

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import ansor_mlir  # noqa: E402
from ansor_bench.roofline import PEAK_CALL_FLOPS, peak_call  # noqa: E402  (imports numpy: after the pinning)
from ansor_mlir import api  # noqa: E402
from ansor_mlir.core.target import detect_host  # noqa: E402
from ansor_mlir.errors import AnsorError  # noqa: E402
from ansor_mlir.frontend.entry_point import entry_point  # noqa: E402
from ansor_mlir.frontend.target_resolution import resolve_target  # noqa: E402
from ansor_mlir.measure.compare import Contender, run_once, time_alternately  # noqa: E402
from ansor_mlir.measure.inputs import make_arrays  # noqa: E402
from ansor_mlir.mlir.iree_compiler import compile_vmfb, first_error_line, tuning_spec_flags  # noqa: E402

EXAMPLES = Path(ansor_mlir.__file__).parent / "examples"
PEAK_ROW = "one core's FMA peak (C kernel)"
# What a user would call instead, per example (numpy's BLAS for the matmul).
LIBRARY = {
    "matmul_bias_relu": ("numpy (OpenBLAS, 1 thread)", lambda a, b, bias: np.maximum(a @ b + bias, 0.0)),
}


def build(text: str, flags: list[str], out: Path) -> Path:
    result = compile_vmfb(text, flags, out)
    if not result.ok:
        raise AnsorError(f"iree-compile failed: {first_error_line(result.stderr)}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--example", default="matmul_bias_relu", help="bundled example name")
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--log", default="runs/example_tuning.jsonl")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cluster", help="build and measure on this Dask scheduler's workers (tcp://HOST:PORT)")
    args = parser.parse_args()
    console = Console(stderr=True)
    source = EXAMPLES / f"{args.example}.mlir"
    text = source.read_text()
    entry = entry_point(text, str(source))
    func = entry.name
    target = resolve_target(detect_host())
    Path(args.log).parent.mkdir(parents=True, exist_ok=True)  # runs/ is not in a fresh clone
    try:
        tuned = api.tune(source, target, trials=args.trials, log=args.log, seed=args.seed, cluster=args.cluster)
        with tempfile.TemporaryDirectory() as tmp:
            default_vmfb = build(text, target.iree_default_flags(), Path(tmp) / "default.vmfb")
            tuned_vmfb = build(tuned.module, target.codegen_flags(), Path(tmp) / "tuned.vmfb")
            # Ordinary IREE flows: the tuning spec carries pipeline configurations, the
            # transform library carries winning transform-dialect strategies.
            spec = Path(tmp) / "spec.mlir"
            spec.write_text(api.emit_tuning_spec(source, args.log, target))
            spec_flags = [*target.compile_flags(), *tuning_spec_flags(spec)]
            library = api.emit_transform_library(source, args.log, target)
            plugin = "IREE + emitted tuning spec"
            if "@ansor_strategy_" in library:
                library_path = Path(tmp) / "library.mlir"
                library_path.write_text(library)
                spec_flags.append(f"--iree-codegen-transform-dialect-library={library_path}")
                plugin += " + transform library"
            spec_vmfb = build(text, spec_flags, Path(tmp) / "spec.vmfb")
            inputs = make_arrays(entry.input_types, f"{args.example}:{args.seed}")
            ref = run_once(default_vmfb, func, inputs)
            for vmfb in (tuned_vmfb, spec_vmfb):
                for a, b in zip(ref, run_once(vmfb, func, inputs), strict=True):
                    if not np.allclose(a, b, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(a).max()))):
                        raise AnsorError(f"{vmfb.name}: output differs from IREE default")
            contenders = [
                Contender("IREE default", default_vmfb, func),
                Contender("ansor-mlir tuned (iree-compile OUT.mlir)", tuned_vmfb, func),
                Contender(plugin, spec_vmfb, func),
            ]
            if args.example in LIBRARY:
                name, call = LIBRARY[args.example]
                for a, b in zip(ref, [call(*inputs)], strict=True):
                    if not np.allclose(a, b, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(a).max()))):
                        raise AnsorError(f"{name}: output differs from IREE default")
                contenders.append(Contender(name, call=call))
            # The core's FMA peak, timed in the same rounds: how far from the hardware each program is (on a
            # core with half-rate 512-bit FMAs IREE's default can already sit near it).
            peak = peak_call(Path(tmp) / "peak", PEAK_CALL_FLOPS)
            if peak is not None:
                contenders.append(Contender(PEAK_ROW, call=lambda *_: peak.call()))
            times = time_alternately(contenders, inputs)
    except AnsorError as exc:
        console.print(f"[red]error[/]: {exc}")
        return 1
    for task in tuned.tasks:
        log = f"{task.speedup:.2f}x" if task.speedup else "-"
        program = f"{task.program_speedup:.2f}x" if task.program_speedup else "-"
        console.print(f"task {task.task.name}: speedup in the log {log}, in the whole program {program}"
                      + (" (no candidate won in the program: IREE's default is used)" if task.fell_back else ""))
    table = Table(title=f"{args.example}: whole program, timed alternately in one run (1 thread)")
    table.add_column("program")
    table.add_column("median time", justify="right")
    table.add_column("speedup vs IREE default", justify="right")
    peak_s = times.pop(PEAK_ROW, None)
    if peak_s is not None:
        table.add_column("% of peak", justify="right")
    program_flops = sum(t.task.flops * t.task.weight for t in tuned.tasks)
    base = times["IREE default"]
    for name, seconds in times.items():
        row = [name, f"{seconds * 1e3:.3f} ms", f"{base / seconds:.2f}x"]
        if peak_s is not None:
            row.append(f"{program_flops / seconds / (peak.flops / peak_s):.0%}")
        table.add_row(*row)
    Console().print(table)
    if peak_s is not None:
        console.print(f"peak: {peak.flops / peak_s / 1e9:.1f} GFLOP/s on one core, timed in the same rounds; "
                      f"% of peak = the program's {program_flops / 1e9:.3f} GFLOP / time / peak")
    return 0


if __name__ == "__main__":
    sys.exit(main())

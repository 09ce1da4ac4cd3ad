"""Tune shapes no test or training log has seen, then build them the two ways a user's IREE flow does.

    python tools/held_out_report.py --docs docs/reports/held_out.md          # 32 trials each (about 15 min)
    python tools/held_out_report.py --trials 8 --workloads Dense      # one, quick
    python tools/held_out_report.py --rewrites phase-decomposition+channels-last+pad-fusion --docs ...

For each held-out workload (`held_out` in ansor_bench/ansor_paper_suite.json,
plus a 3x3 conv and a depthwise conv at shapes the suite does not list) this
runs the commands of the README's `ansor-opt` section as subprocesses:

    ansor-opt IN.mlir --ansor-tune="trials=T log=L.jsonl rewrites=R" -o OUT.mlir
    ansor-opt IN.mlir --ansor-rewrite="rewrites=R" -o REWRITTEN.mlir
    ansor-opt REWRITTEN.mlir --ansor-emit-tuning-spec="log=L.jsonl" -o SPEC.mlir
    iree-compile IN.mlir                                         (IREE's default)
    iree-compile OUT.mlir                                        (the tuned flow-level module)
    iree-compile REWRITTEN.mlir --iree-codegen-tuning-spec-path=SPEC.mlir

(`REWRITTEN.mlir` is `IN.mlir` when no rewrite applies, and the spec is emitted
from and applied to `IN.mlir` when the log records that the tuned rewritten
program lost to the input's IREE default, as a user's `ansor-opt IN.mlir
--ansor-emit-tuning-spec="log=L.jsonl rewrites=R"` does; an `OUT.mlir` with a
fused pad also gets `--iree-flow-enable-pad-handling`, see docs/reports/program_rewrites.md)

and times the three programs alternately in one process (1 thread), every
output checked against numpy. Logs live in `--work`; a rerun resumes them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ansor_bench.report import provenance  # noqa: E402
from ansor_bench.timing import mismatch, time_alternately  # noqa: E402
from ansor_bench.workloads import Workload, make_workload, suite_shapes  # noqa: E402

# name -> suite generator and shape; none of these shapes is in a test, the suite or data/MANIFEST.json's logs
# (Dense's is the suite json's `held_out` row).
HELD_OUT = {
    "Dense": ("Dense", suite_shapes("Dense")[0]),
    "C2D-3x3": ("C2D", (1, 20, 20, 160, 192, 3, 1, 1)),
    "DEP-3x3": ("DEP", (1, 42, 42, 144, 3, 1, 1)),
}
BUILDS = ("iree_default", "out_mlir", "tuning_spec")


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise SystemExit(f"held_out_report: `{' '.join(command)}` failed: {lines[-1] if lines else done.returncode}")


def build_all(workload: Workload, work: Path, trials: int, flags: list[str], rewrites: str,
              default_flags: list[str]) -> dict[str, Path]:
    """Tune (resuming the log), emit OUT.mlir, the rewritten program and SPEC.mlir, and compile the three
    programs (IREE's default with `default_flags`, the tuned ones with `flags`)."""
    from ansor_mlir.mlir.iree_compiler import flow_level_flags, tuning_spec_flags

    work.mkdir(parents=True, exist_ok=True)
    source, out, spec, log = work / "IN.mlir", work / "OUT.mlir", work / "SPEC.mlir", work / "L.jsonl"
    source.write_text(workload.mlir)
    _run(["ansor-opt", str(source), f"--ansor-tune=trials={trials} log={log} seed=0 rewrites={rewrites}",
          "-o", str(out)])
    if rewrites_dropped(log):
        # The spec is the input's (`api.for_ordinary_flows`): built on REWRITTEN.mlir it gave the rewritten
        # program's IREE default, slower than the input's (DEP: 0.76x).
        spec_program = source
        _run(["ansor-opt", str(source), f"--ansor-emit-tuning-spec=log={log} rewrites={rewrites}", "-o", str(spec)])
    else:
        spec_program = work / "REWRITTEN.mlir"
        _run(["ansor-opt", str(source), f"--ansor-rewrite=rewrites={rewrites}", "-o", str(spec_program)])
        _run(["ansor-opt", str(spec_program), f"--ansor-emit-tuning-spec=log={log}", "-o", str(spec)])
    vmfbs = {name: work / f"{name}.vmfb" for name in BUILDS}
    _run(["iree-compile", *default_flags, str(source), "-o", str(vmfbs["iree_default"])])
    _run(["iree-compile", *flags, *flow_level_flags(out.read_text()), str(out), "-o", str(vmfbs["out_mlir"])])
    _run(["iree-compile", *flags, *tuning_spec_flags(spec), str(spec_program), "-o",
          str(vmfbs["tuning_spec"])])
    return vmfbs


def rewrites_dropped(log: Path) -> bool:
    """Whether the log's latest program check dropped the rewrites (a held-out log tunes one program)."""
    from ansor_mlir.database.records import read_program_records

    records = read_program_records(log) if log.is_file() else []
    return bool(records) and not records[-1].rewrites_kept


def measure(label: str, workload: Workload, vmfbs: dict[str, Path]) -> dict:
    from ansor_mlir.measure.vm_call import timed_call
    from ansor_mlir.mlir.iree_module import CompiledModel

    inputs = workload.inputs()
    expected = workload.reference(inputs)
    programs = {name: CompiledModel(path.read_bytes(), workload.func_name) for name, path in vmfbs.items()}
    wrong = {name: why for name, p in programs.items() if (why := mismatch([p(*inputs)], expected))}
    # Timed through the VM with the inputs placed once: `p(*inputs)` would also time copying them in and the
    # outputs out, as long as the depthwise conv's kernel itself.
    timings = time_alternately({name: timed_call(p, inputs) for name, p in programs.items()}, rounds=15,
                               min_round_s=0.1)
    ms = {name: t.median_s * 1e3 for name, t in timings.items()}
    return {"label": label, "workload": workload.label, "gflop": workload.flops / 1e9, "ms": ms, "wrong": wrong,
            "search": search_speedups(vmfbs["out_mlir"].parent / "L.jsonl")}


def search_speedups(log: Path) -> list[float]:
    """Per task, its IREE default's time over the best measured candidate's, from the log: what the search
    found on its own, apart from the program rewrites (which change IREE's default too)."""
    from ansor_mlir.database.records import read_records

    default: dict[str, float] = {}
    best: dict[str, float] = {}
    for record in read_records(log):
        if record.ok and record.program is None:
            key, seconds = record.task_key, record.result.median_s
            best[key] = min(best.get(key, seconds), seconds)
            if record.is_default:
                default[key] = seconds
    return [default[k] / best[k] for k in sorted(default)]


def markdown(rows: list[dict], trials: int, flags: list[str], rewrites: str, cpu: str) -> str:
    from ansor_mlir.core.target import REASSOCIATE_FP_REDUCTIONS_FLAG

    lines = [
        "# Held-out shapes through ordinary IREE flows",
        "",
        f"{provenance('held_out_report.py', sys.argv[1:], ROOT)}, IREE's `host` CPU resolved to `{cpu}`, 1 thread, "
        "a shared 2-core machine: compare the ratios.",
        "",
        f"Each workload (shapes no test, suite entry or training log has) is tuned with `ansor-opt "
        f"--ansor-tune=\"trials={trials} rewrites={rewrites}\"`; the tuned program is then built by plain "
        "`iree-compile` twice: from the tuned flow-level module `OUT.mlir` (with `--iree-flow-enable-pad-handling` "
        "where it holds a fused pad), and from the program after its rewrites (`ansor-opt --ansor-rewrite`; the "
        "input itself when none applies, or when the log records that the rewrites lost) with the emitted tuning spec "
        f"(`--iree-codegen-tuning-spec-path=SPEC.mlir`). Compile flags of the two tuned builds: `{' '.join(flags)}`; "
        f"IREE's default is built with the target's flags alone (no `{REASSOCIATE_FP_REDUCTIONS_FLAG}`, "
        "`core.target.Target.iree_default_flags`). The three programs "
        "are timed alternately (15 rounds) through the VM with their inputs placed on the device once "
        "(`measure.vm_call.timed_call`: no copies in or out); every output is checked against numpy. IREE's "
        "default builds the untouched input. The search column is each task's own gain in the log (its IREE "
        "default over its best candidate, both after the rewrites): 1.00x means the rewrites alone made the "
        "difference.",
        "",
        "| workload | GFLOP | IREE default (ms) | `iree-compile OUT.mlir` (ms) | speedup | with the tuning spec (ms) "
        "| speedup | search (log) | outputs |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        ms = r["ms"]
        ok = "match numpy" if not r["wrong"] else "; ".join(f"{k}: {v}" for k, v in r["wrong"].items())
        lines.append(
            f"| {r['label']} `{r['workload']}` | {r['gflop']:.3f} | {ms['iree_default']:.3f} | {ms['out_mlir']:.3f} "
            f"| **{ms['iree_default'] / ms['out_mlir']:.2f}x** | {ms['tuning_spec']:.3f} "
            f"| **{ms['iree_default'] / ms['tuning_spec']:.2f}x** | "
            f"{', '.join(f'{x:.2f}x' for x in r['search']) or '-'} | {ok} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default=",".join(HELD_OUT), help=f"comma-separated, of {', '.join(HELD_OUT)}")
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--work", type=Path, default=Path("build/held_out"))
    parser.add_argument("--docs", type=Path, help="write the report here (e.g. docs/reports/held_out.md)")
    parser.add_argument("--rewrites", default=None, help="program rewrites (ansor-opt's rewrites=; default: its "
                                                         "default)")
    args = parser.parse_args(argv)
    names = [n for n in args.workloads.split(",") if n]
    unknown = [n for n in names if n not in HELD_OUT]
    if unknown:
        print(f"held_out_report: error: unknown workload {unknown[0]}: choose from {', '.join(HELD_OUT)}",
              file=sys.stderr)
        return 2
    from ansor_mlir import api
    from ansor_mlir.frontend.program_rewrites import DEFAULT_REWRITES

    target = api.resolve_target("llvm-cpu")
    flags = target.compile_flags()
    rewrites = args.rewrites or DEFAULT_REWRITES
    rows = []
    for name in names:
        generator, shape = HELD_OUT[name]
        workload = make_workload(generator, shape)
        print(f"{name}: tuning {workload.label} ({args.trials} trials)", flush=True)
        rows.append(measure(name, workload, build_all(workload, args.work / name, args.trials, flags,
                                                         rewrites, target.iree_default_flags())))
        print(rows[-1], flush=True)
    text = markdown(rows, args.trials, flags, rewrites, target.resolved_cpu)
    print(text)
    if args.docs:
        args.docs.write_text(text)
    return 1 if any(r["wrong"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

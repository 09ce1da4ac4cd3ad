"""Tune part of the Ansor suite for a named ARM CPU on this x86-64 host and verify every choice under qemu.

No ARM machine is needed and none is timed: per task the cost model ranks
candidates built for the CPU, the best pick whose outputs match IREE's
default built for this host (run under qemu-aarch64) is chosen
(`tuning.cross_tuning`), then the whole tuned program is built for aarch64,
run under qemu and compared with the suite's numpy reference. Writes a
markdown report with the command and the commit.

    python tools/aarch64_report.py --cpu neoverse-v1 --trials 4 --docs docs/reports/aarch64.md
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # ansor_bench sits at the repo root, not installed

from ansor_bench.workloads import make_workload, suite_shapes  # noqa: E402
from ansor_mlir import api  # noqa: E402
from ansor_mlir.core.target import parse_target  # noqa: E402
from ansor_mlir.frontend.target_resolution import resolve_target  # noqa: E402
from ansor_mlir.measure.arrays import encode_array  # noqa: E402
from ansor_mlir.measure.builder import BuiltProgram  # noqa: E402
from ansor_mlir.measure.qemu_runner import QemuRunner, find_emulated_runtime  # noqa: E402
from ansor_mlir.measure.runner import RunInput  # noqa: E402
from ansor_mlir.mlir.iree_compiler import compile_vmfb, first_error_line  # noqa: E402
from ansor_mlir.tuning.cross_tuning import tune_by_model  # noqa: E402
from ansor_mlir.tuning.tuner import TuneOptions  # noqa: E402

OPS = ("GMM", "C2D", "DEP", "NRM", "softmax")
# A run under qemu that matched is `not_measured` in the log (correct, never timed).
VERDICTS = {"not_measured": "correct"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", default="neoverse-v1")
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--shape", type=int, default=0, help="row of each op's suite shapes (default: the first)")
    parser.add_argument("--trials", type=int, default=4, help="model picks tried per task at most")
    parser.add_argument("--out", type=Path, default=Path("runs/aarch64"))
    parser.add_argument("--docs", type=Path, default=Path("docs/reports/aarch64.md"))
    args = parser.parse_args()
    runtime = find_emulated_runtime("aarch64")
    if isinstance(runtime, str):
        print(f"aarch64_report: {runtime}", file=sys.stderr)
        return 1
    target = resolve_target(parse_target(f"aarch64:{args.cpu}"))
    args.out.mkdir(parents=True, exist_ok=True)
    rows, notes = [], []
    for op in args.ops.split(","):
        workload = make_workload(op, suite_shapes(op)[args.shape])
        log = args.out / f"{op}.jsonl"
        log.unlink(missing_ok=True)
        started = time.perf_counter()
        choices = tune_by_model(workload.mlir, workload.label, target, TuneOptions(trials=args.trials, log=log),
                                runtime)
        tuned = api.apply_best(workload.mlir, log, target, workload.label)
        program = args.out / f"{op}.vmfb"
        built = compile_vmfb(tuned, target.codegen_flags(), program, timeout_s=600)
        if not built.ok:
            notes.append(f"{workload.label}: the tuned program did not build: {first_error_line(built.stderr)}")
            continue
        inputs = workload.inputs()
        reference = tuple(encode_array(r) for r in workload.reference(inputs))
        with QemuRunner(runtime) as runner:
            whole = runner.submit(RunInput(BuiltProgram(program.read_bytes(), workload.func_name),
                                           tuple(encode_array(x) for x in inputs), reference)).result().measured
        seconds = time.perf_counter() - started
        for choice in choices:
            chosen = choice.chosen
            picked = f"sketch {chosen.candidate.sketch_index} ({chosen.family.value}: {', '.join(chosen.rules)})"
            if chosen is choice.default:
                picked = "IREE's default (no model pick passed)"
            rejected = [r.result.error.value for r in choice.tried if r.result.error.value != "not_measured"]
            rows.append((workload.label, choice.task.name, picked, len(choice.tried), ", ".join(rejected) or "-",
                         f"{chosen.result.max_abs_error:.1e}", VERDICTS.get(whole.error.value, whole.error.value),
                         f"{whole.max_abs_error:.1e}"
                         if whole.max_abs_error is not None else "-", f"{seconds:.0f}"))
        print(f"{workload.label}: {len(choices)} tasks, program {whole.error.value} ({whole.message})", flush=True)
    write_doc(args, target.fingerprint, rows, notes)
    return 0


def write_doc(args: argparse.Namespace, fingerprint: str, rows: list[tuple], notes: list[str]) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    host = subprocess.run(["uname", "-m"], capture_output=True, text=True).stdout.strip()
    lines = [
        f"# aarch64:{args.cpu} without an ARM machine: model-ranked, qemu-verified",
        "",
        f"Command: `python tools/aarch64_report.py --cpu {args.cpu} --ops {args.ops} --shape {args.shape} "
        f"--trials {args.trials} --docs {args.docs}` at commit `{commit}`, on a {host} host "
        f"(target fingerprint `{fingerprint}`).",
        "",
        "Nothing here is a time: qemu-user runs aarch64 code about 400x slower than the hardware, so the",
        "tuner ranks each task's candidates with the cost model (the shipped model, trained on x86 measurements:",
        "a guess for this CPU) and verifies the best picks under `qemu-aarch64-static` with IREE's aarch64",
        "`iree-run-module`, against IREE's default build of the task for this host (an independent",
        "compilation). The first pick that matches is chosen. Then the whole tuned program is built for",
        "aarch64, run under qemu and compared with the suite's numpy reference (float64 accumulation).",
        "IREE resolves the CPU to 16-byte vectors (NEON): its SVE is used only by IREE's opt-in scalable",
        "vectorization, so register tiles are 4 f32 lanes. Timings need the real machine: export a batch",
        "(`ansor-measure export ... --target aarch64:CPU`) and measure it there with the offline runner.",
        "",
        "| workload | task | chosen | picks tried | rejected picks | task max err vs host IREE | "
        "program vs numpy | program max err | seconds |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *("| " + " | ".join(str(c) for c in row) + " |" for row in rows),
        "",
        "Sketch 0 is IREE's own configuration (the model may rank it first). A verified pick is logged",
        "`not_measured` (correct, never timed); a mismatch would be `wrong_answer`. Seconds: tuning",
        "(compiles, qemu runs) plus the whole-program check, per workload, on a loaded 2-core host.",
    ]
    lines += [f"- {note}" for note in notes]
    args.docs.parent.mkdir(parents=True, exist_ok=True)
    args.docs.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.docs}")


if __name__ == "__main__":
    sys.exit(main())

"""Compare the two sketch families on the Ansor suite: sketches, success rate, best vs IREE's default.

For each suite entry (first shape, batch 1) the main task is taken (the
dispatch whose root has reductions and the most loop iterations: the conv,
contraction or reduction, not a pad or transpose around it). N random
candidates per family are compiled, run once and checked against IREE's
untuned build; then IREE's default and each family's fastest candidate are
timed in one alternating run (ratios only: >1 means faster than IREE's
default). Writes a markdown table.

    python tools/sketch_family_table.py --candidates 64 -o table.md
    python tools/sketch_family_table.py --candidates 64 --limit C3D=16 --entries GMM C3D
    python tools/sketch_family_table.py --shape GMM=1,109,109,109 --rule padding --candidates 16

`--shape` runs an entry at any shape; `--rule` screens only the sketches
derived by that rule (one rule's effect, measured against IREE's default).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from ansor_mlir.core.schedule import FAMILIES
from ansor_mlir.core.target import Target, detect_host
from ansor_mlir.core.task import main_task
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.builder import BuildInput
from ansor_mlir.measure.compare import Contender, time_alternately
from ansor_mlir.measure.inputs import encode_array, make_inputs
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.measure.local_runner import LocalRunner
from ansor_mlir.measure.runner import RunInput, run_builds
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.space.annotation import sample_candidate
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.tuner import build_input, task_module

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # ansor_bench sits at the repo root, not installed
from ansor_bench.workloads import make_workload, suite_workloads  # noqa: E402

CHUNK = 4


def screen_family(task, sketches, family, count, rng, flow, builder, runner, inputs, refs,
                  rule: str | None = None) -> dict:
    """Build, run once and verify `count` random candidates of one family; keep the fastest."""
    open_sketches = [s for s in sketches if s.family == family and s.knobs and (rule is None or rule in s.rules)]
    candidates = []
    for _ in range(count if open_sketches else 0):
        sketch = rng.choice(open_sketches)
        candidate = sample_candidate(sketch, task, builder.target, rng)
        if candidate is not None:
            candidates.append((sketch, candidate))
    ok, best, best_vmfb, best_candidate, errors = 0, None, None, None, {}
    for start in range(0, len(candidates), CHUNK):
        chunk = candidates[start:start + CHUNK]
        builds = builder.build([build_input(task, s, c, flow) for s, c in chunk])
        results = run_builds(runner, builds, lambda program: RunInput(program, inputs, refs))
        for (sketch, candidate), build, result in zip(chunk, builds, results, strict=True):
            if result.ok:
                ok += 1
                if best is None or result.median_s < best:
                    best, best_vmfb = result.median_s, build.program.vmfb
                    best_candidate = {"rules": list(sketch.rules), "values": dict(candidate.values)}
            else:
                errors[result.error.value] = errors.get(result.error.value, 0) + 1
    return {"sketches": len(open_sketches), "tried": len(candidates), "ok": ok, "errors": errors,
            "best_vmfb": best_vmfb, "best": best_candidate}


def measure_entry(name: str, mlir: str, target: Target, count: int, seed: int, rule: str | None = None) -> dict:
    task = main_task(extract_tasks(mlir, target, name))
    flow = compile_to_phase(task_module(task), target.compile_flags(), "flow", task.name)
    sketches = generate_sketches(task, target)
    builder = LocalBuilder(target, workers=2, timeout_s=120)
    runner = LocalRunner(target, timeout_s=60, min_time_s=0.0, min_repeats=1)
    arrays = make_inputs(task, seed)
    inputs = tuple(encode_array(a) for a in arrays)
    (ref_build,) = builder.build([BuildInput(task.key, flow, task.root_index, None)])
    assert ref_build.ok, f"{name}: IREE's default failed to build: {ref_build.message}"
    row = {"entry": name, "task": task.name, "candidates": count}
    rng = random.Random(seed)
    try:
        reference = runner.submit(RunInput(ref_build.program, inputs, return_outputs=True)).result()
        assert reference.measured.ok, f"{name}: IREE's default failed: {reference.measured.message}"
        for family in FAMILIES:
            row[family] = screen_family(task, sketches, family, count, rng, flow, builder, runner, inputs,
                                        reference.outputs, rule)
    finally:
        builder.close()
        runner.close()
    contenders = [Contender("default", ref_build.program.vmfb, task.func_name)] + [
        Contender(family, row[family]["best_vmfb"], task.func_name)
        for family in FAMILIES if row[family]["best_vmfb"]
    ]
    times = time_alternately(contenders, arrays, rounds=7)
    row["default_s"] = times["default"]
    for family in FAMILIES:
        row[family]["best_s"] = times.get(family)
        row[family].pop("best_vmfb")
    return row


def cell(row: dict, family: str) -> tuple[str, str, str]:
    data = row[family]
    if not data["sketches"]:
        return "0", "-", "-"
    rate = f"{data['ok']}/{data['tried']}"
    ratio = f"{row['default_s'] / data['best_s']:.2f}" if data["best_s"] else "-"
    return str(data["sketches"]), rate, ratio


def failures(row: dict) -> str:
    parts = [f"{family[0]}: {kind} {n}" for family in FAMILIES for kind, n in sorted(row[family]["errors"].items())]
    return ", ".join(parts) or "-"


def markdown(rows: list[dict]) -> str:
    lines = [
        "| entry | task | N | pipeline sketches | pipeline ok | pipeline best/default | transform sketches "
        "| transform ok | transform best/default | failures |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        p, t = cell(row, "pipeline"), cell(row, "transform")
        lines.append(f"| {row['entry']} | {row['task']} | {row['candidates']} | {' | '.join(p)} | {' | '.join(t)} "
                     f"| {failures(row)} |")
    note = ("\nN random candidates per family and entry; ok = compiled, ran and matched IREE's untuned output; "
            "ratio = IREE default time / best candidate time, timed alternately in one run "
            "(>1: faster than IREE's default).\n")
    return "\n".join(lines) + "\n" + note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=64)
    parser.add_argument("--limit", nargs="*", default=[], metavar="ENTRY=N",
                        help="fewer candidates for an entry (heavy convolutions)")
    parser.add_argument("--entries", nargs="*", default=None, help="suite entries (default: all)")
    parser.add_argument("--shape", nargs="*", default=[], metavar="ENTRY=DIMS",
                        help="an entry at another shape (GMM=1,109,109,109), instead of the suite's first shapes")
    parser.add_argument("--rule", default=None,
                        help="screen only sketches derived by this rule (padding, rfactor, packing, decompose)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also append each row as a JSON line here")
    parser.add_argument("-o", dest="output", default="-")
    args = parser.parse_args()
    limits = {k: int(v) for k, v in (item.split("=", 1) for item in args.limit)}
    target = resolve_target(detect_host())
    rows = []
    workloads = [make_workload(name, [int(x) for x in dims.split(",")])
                 for name, dims in (item.split("=", 1) for item in args.shape)]
    for workload in workloads or suite_workloads(args.entries, first_only=True):
        count = limits.get(workload.name, args.candidates)
        row = measure_entry(workload.name, workload.mlir, target, count, args.seed, args.rule)
        print(markdown([row]).splitlines()[2], flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
        rows.append(row)
    text = markdown(rows)
    if args.output == "-":
        print(text)
    else:
        Path(args.output).write_text(text)


if __name__ == "__main__":
    main()

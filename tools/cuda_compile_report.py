"""Compile random annotated CUDA candidates of every GPU sketch and report success rates; writes docs/reports/cuda.md.

No GPU is needed: `iree-compile --iree-hal-target-device=cuda --iree-cuda-target=ARCH` embeds PTX. For each
input in examples/gpu/ (matmul f32 and f16, a 3x3 convolution, softmax, a row reduction) every task's sketches
are generated for `cuda:ARCH`; sketch zero (IREE's own configuration) is built once, and up to `--candidates`
distinct random valid candidates of every other sketch are built with the tuner's own builder. Nothing is run.

    python tools/cuda_compile_report.py --candidates 16 --docs docs/reports/cuda.md
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ansor_mlir.core.target import parse_target
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.space.annotation import sample_candidate
from ansor_mlir.space.gpu_mapping import gpu_mapping, is_gpu_sketch
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.tuner import build_input, task_module

ROOT = Path(__file__).resolve().parent.parent
INPUTS = ("matmul", "matmul_f16", "conv3x3", "softmax", "row_reduction")


@dataclass
class Row:
    """Build outcomes of one sketch of one task."""

    op: str
    task: str
    sketch: int
    family: str
    pipeline: str
    sampled: int = 0
    compiled: int = 0
    seconds: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    example: str = ""


def report_rows(arch: str, count: int, seed: int, workers: int, timeout_s: float) -> list[Row]:
    target = resolve_target(parse_target(f"cuda:{arch}"))
    rows = []
    with LocalBuilder(target, workers=workers, timeout_s=timeout_s) as builder:
        for op in INPUTS:
            path = ROOT / "examples" / "gpu" / f"{op}.mlir"
            for task in extract_tasks(path.read_text(), target, str(path)):
                flow = compile_to_phase(task_module(task), target.compile_flags(), "flow", task.name)
                for sketch in generate_sketches(task, target):
                    rng = random.Random(seed)
                    family = "+".join(sketch.rules)
                    row = Row(op, task.name, sketch.index, family, sketch.pipeline)
                    candidates, seen = [], set()
                    for _ in range(count * 4 if sketch.knobs else 1):
                        candidate = sample_candidate(sketch, task, target, rng)
                        if candidate is not None and candidate.identity not in seen:
                            seen.add(candidate.identity)
                            candidates.append(candidate)
                        if len(candidates) >= (count if sketch.knobs else 1):
                            break
                    if candidates and is_gpu_sketch(sketch):
                        mapping = gpu_mapping(sketch, candidates[0], task)
                        row.example = (f"{mapping.blocks} blocks x {mapping.threads} threads, "
                                       f"{mapping.shared_bytes} B shared")
                    results = builder.build([build_input(task, sketch, c, flow) for c in candidates])
                    row.sampled = len(candidates)
                    for result in results:
                        if result.ok:
                            row.compiled += 1
                            row.seconds.append(result.compile_s)
                        else:
                            text = result.message
                            message = f"{result.error.value}: {text[text.find('error'):] if 'error' in text else text}"
                            message = message[:160]
                            row.errors[message] = row.errors.get(message, 0) + 1
                    rows.append(row)
                    print(f"{op} {task.name} s{sketch.index} {family}: {row.compiled}/{row.sampled}", file=sys.stderr)
    return rows


def _rate(compiled: int, sampled: int) -> str:
    return f"{compiled}/{sampled} ({100.0 * compiled / sampled:.0f}%)" if sampled else "0/0"


def render(rows: list[Row], command: str, arch: str, elapsed: float) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                            check=False).stdout.strip()
    from iree.compiler import version

    lines = [
        f"# CUDA ({arch}) compile report: GPU sketches and random candidates",
        "",
        f"Command: `{command}`  ",
        f"Commit: `{commit}`; IREE {version.VERSION}; host {platform.machine()} with no GPU "
        f"({time.strftime('%Y-%m-%d')}, {elapsed:.0f} s).",
        "",
        f"Every candidate is compiled for `--iree-hal-target-device=cuda --iree-cuda-target={arch}` "
        "(PTX embedded, nothing run: no CUDA device here). Candidates are distinct random valid annotations "
        "(`space.annotation.sample_candidate`, seeded) of each sketch, built by the tuner's own builder with "
        "the configuration on the root op (`#iree_gpu.lowering_config` + `translation_info`). Sketch zero is "
        "IREE's own configuration (nothing attached), built once. Families: IREE's GPU pipelines configured "
        "(`TileAndFuse`, tensor cores, `VectorDistribute`) and transform-dialect strategies "
        "(`TransformDialectCodegen`). Compiling is all this shows: nothing has run on a GPU, so neither the "
        "correctness nor the speed of any candidate is known.",
        "",
        "## Per sketch family",
        "",
        "| family (rules) | IREE pipeline | sketches | compiled / candidates |",
        "| --- | --- | ---: | ---: |",
    ]
    families: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in rows:
        families[(row.family, row.pipeline)].append(row)
    for (family, pipeline), group in families.items():
        lines.append(f"| {family} | {pipeline} | {len(group)} | "
                     f"{_rate(sum(r.compiled for r in group), sum(r.sampled for r in group))} |")
    lines += ["", "## Per op, task and sketch", "",
              "| op | task | sketch | family | compiled / candidates | median compile s | first candidate | "
              "errors |", "| --- | --- | ---: | --- | ---: | ---: | --- | --- |"]
    for row in rows:
        median = f"{statistics.median(row.seconds):.2f}" if row.seconds else "-"
        errors = "; ".join(f"{n}x `{m}`" for m, n in row.errors.items()) or "-"
        lines.append(f"| {row.op} | {row.task} | s{row.sketch} | {row.family} | {_rate(row.compiled, row.sampled)} | "
                     f"{median} | {row.example or '-'} | {errors} |")
    lines += ["", "## Per op", "", "| op | compiled / candidates |", "| --- | ---: |"]
    for op in INPUTS:
        group = [r for r in rows if r.op == op]
        lines.append(f"| {op} | {_rate(sum(r.compiled for r in group), sum(r.sampled for r in group))} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_80")
    parser.add_argument("--candidates", type=int, default=16, help="random candidates per sketch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout-s", type=float, default=300.0,
                        help="per compile (a loaded host slows IREE down; a timeout is reported as one)")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs" / "reports" / "cuda.md")
    args = parser.parse_args()
    start = time.perf_counter()
    rows = report_rows(args.arch, args.candidates, args.seed, args.workers, args.timeout_s)
    command = "python tools/cuda_compile_report.py " + " ".join(sys.argv[1:])
    args.docs.write_text(render(rows, command.strip(), args.arch, time.perf_counter() - start))
    print(f"wrote {args.docs}", file=sys.stderr)


if __name__ == "__main__":
    main()

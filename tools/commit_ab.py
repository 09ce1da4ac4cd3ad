"""Tune the suite with two commits of ansor-mlir and time what each chose, alternately, in one run.

A refactor that must not change behaviour is checked by its result: each commit (checked out in a temporary
git worktree) tunes every op with the same seed and budget into its own log; then one process builds each log's
best program with IREE and times both, with IREE's default, in interleaved rounds, checking every output
against numpy. Ratios near 1.0 (within the run's noise, which the default-against-itself ratio shows) say the
commits chose programs that run alike.

    python tools/commit_ab.py --base 1293bdc --head HEAD --trials 16 --docs docs/reports/commit_ab.md
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# Run inside each worktree: tune one op (name, shape) into a log, with the commit's own code.
TUNE_ONE = """
import sys
from ansor_bench.workloads import make_workload
from ansor_mlir import api
name, shape, trials, log = sys.argv[1], [int(x) for x in sys.argv[2].split(",")], int(sys.argv[3]), sys.argv[4]
workload = make_workload(name, shape)
api.tune(workload.mlir, "llvm-cpu", trials=trials, log=log, seed=0, progress=False)
"""


def worktree(commit: str, where: Path) -> Path:
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(where), commit], check=True)
    return where


def resolve(commit: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", commit], capture_output=True, text=True,
                          check=True).stdout.strip()


def tune(tree: Path, workload, trials: int, log: Path) -> float:
    """Seconds the commit in `tree` took to tune `workload` into `log`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", TUNE_ONE, workload.name, ",".join(map(str, workload.shape)),
                           str(trials), str(log)], cwd=tree, env=env, capture_output=True, text=True, timeout=7200)
    if done.returncode != 0:
        raise SystemExit(f"{tree.name}: tuning {workload.label} failed:\n{done.stderr[-3000:]}")
    return time.monotonic() - start


def built(text: str, flags: list[str], out: Path) -> Path:
    from ansor_mlir.mlir.iree_compiler import compile_vmfb

    result = compile_vmfb(text, flags, out)
    if not result.ok:
        raise SystemExit(f"{out.name}: {result.stderr[-2000:]}")
    return out


def same_choice(logs: dict[str, Path]) -> bool:
    """Whether both logs' best records pick the same candidates (identical programs, by construction)."""
    from ansor_mlir.core.target import detect_host
    from ansor_mlir.database.records import best_records, read_records
    from ansor_mlir.frontend.target_resolution import resolve_target

    target = resolve_target(detect_host())
    picks = [{k: r.candidate.identity for k, r in best_records(read_records(log), target.key,
                                                                target.fingerprint).items()}
             for log in logs.values()]
    return all(p == picks[0] for p in picks)


def time_op(workload, logs: dict[str, Path], rounds: int, tmp: Path) -> dict[str, float]:
    """Median seconds of IREE's default (twice: the noise) and of each log's best program, alternated."""
    import numpy as np

    from ansor_mlir import api
    from ansor_mlir.core.target import detect_host
    from ansor_mlir.frontend.target_resolution import resolve_target
    from ansor_mlir.measure.compare import Contender, run_once, time_alternately

    target = resolve_target(detect_host())
    inputs = workload.inputs()
    expected = workload.reference(inputs)
    default = built(workload.mlir, target.iree_default_flags(), tmp / f"{workload.name}_default.vmfb")
    contenders = [Contender("IREE default", default, workload.func_name),
                  Contender("IREE default again", default, workload.func_name)]
    for name, log in logs.items():
        module = api.apply_best(workload.mlir, log, target)
        vmfb = built(module, target.codegen_flags(), tmp / f"{workload.name}_{name}.vmfb")
        for got, want in zip(run_once(vmfb, workload.func_name, inputs), expected, strict=True):
            if not np.allclose(got, want, rtol=2e-3, atol=2e-3 * max(1.0, float(np.abs(want).max()))):
                raise SystemExit(f"{workload.label}: {name}'s program gives wrong outputs")
        contenders.append(Contender(name, vmfb, workload.func_name))
    return time_alternately(contenders, inputs, rounds=rounds)


def markdown(rows: list[dict], base: str, head: str, command: str, host: str) -> str:
    lines = [
        f"# {head} against {base}: what each commit's search chose, timed alternately",
        "",
        "- **What:** the suite's ops tuned by each commit (same seed and budget), each log's best program built "
        "and timed against the other's and IREE's default in one run.",
        f"- **Where:** {host}.",
        f"- **Result:** geomean {head} / {base} time ratio "
        f"**{geomean([r['ratio'] for r in rows]):.3f}** (1.0: alike); IREE's default against itself "
        f"{geomean([r['noise'] for r in rows]):.3f} (the run's noise); the same candidates chosen for "
        f"{sum(r['same'] for r in rows)} of {len(rows)} ops.",
        "- **Caveat:** a shared 2-core machine; a ratio beyond the default-against-itself spread is a difference.",
        f"- **Regenerate:** `{command}`.",
        "",
        f"| op | IREE default (us) | {base} (us) | {head} (us) | {head} / {base} | default / default | same choice |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        lines.append(f"| {r['op']} | {r['default'] * 1e6:.1f} | {r['base'] * 1e6:.1f} | {r['head'] * 1e6:.1f} | "
                     f"{r['ratio']:.3f} | {r['noise']:.3f} | {'yes' if r['same'] else 'no'} |")
    return "\n".join(lines) + "\n"


def geomean(values: list[float]) -> float:
    return statistics.geometric_mean(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--head", default="HEAD", help="the commit under test (default HEAD)")
    parser.add_argument("--ops", default="", help="comma-separated suite entries (default: all, first shapes)")
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--docs", help="write the markdown report here")
    parser.add_argument("--out", default="runs/commit_ab", help="logs and results")
    args = parser.parse_args()
    from ansor_bench.workloads import suite_workloads

    names = [n for n in args.ops.split(",") if n] or None
    workloads = suite_workloads(names, first_only=True)
    base, head = resolve(args.base), resolve(args.head)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ansor_ab_") as tmp:
        trees = {"base": worktree(base, Path(tmp) / f"base_{base}"), "head": worktree(head, Path(tmp) / f"head_{head}")}
        try:
            for workload in workloads:
                logs = {}
                for side, tree in trees.items():
                    logs[side] = out / f"{side}_{workload.name}.jsonl"
                    if not logs[side].exists():
                        seconds = tune(tree, workload, args.trials, logs[side])
                        print(f"{workload.label}: {side} tuned in {seconds:.0f} s", file=sys.stderr)
                times = time_op(workload, logs, args.rounds, Path(tmp))
                row = {"op": workload.label, "default": times["IREE default"], "base": times["base"],
                       "head": times["head"], "ratio": times["head"] / times["base"],
                       "noise": times["IREE default again"] / times["IREE default"], "same": same_choice(logs)}
                print(json.dumps(row), file=sys.stderr)
                rows.append(row)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    import platform

    from ansor_bench.report import cpu_model

    command = "python tools/" + " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
    text = markdown(rows, base, head, command, f"{cpu_model()}, {os.cpu_count()} cores, {platform.machine()}")
    print(text)
    if args.docs:
        Path(args.docs).write_text(text)


if __name__ == "__main__":
    main()

"""Benchmark outputs: stdout table, CSV, JSON, PNG plots and the markdown report.

Everything is rendered from one `BenchReport` (the measured cells, tuning
curves, roofline and run metadata), so the markdown, the CSV and the plots
can never disagree; `docs/benchmarks.md` is this module's output, not prose.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from rich.table import Table

from ansor_bench.roofline import Roofline
from ansor_bench.suite import OK, Cell, Curve, geomean_speedup, speedup

BASELINES = ("IREE default", "PyTorch", "TVM MetaSchedule")
TUNED = "ansor-mlir tuned"


@dataclass(frozen=True)
class BenchReport:
    meta: dict
    roofline: Roofline
    contenders: list[str]
    workloads: list[str]
    cells: list[Cell]
    curves: list[Curve]

    def cell(self, workload: str, contender: str) -> Cell | None:
        return next((c for c in self.cells if c.workload == workload and c.contender == contender), None)


# --------------------------------------------------------------------------- metadata


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def cpu_model() -> str:
    """The CPU's model name, for a report's header."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit(repo: Path) -> str:
    """The short commit of `repo`, marked when tracked files have uncommitted changes, for a report's header."""
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out + (" (with uncommitted changes)" if dirty else "")


def run_metadata(command: str, budgets: dict, repo: Path) -> dict:
    """Machine, versions, budgets and date: what a reader needs to reproduce or discount the numbers."""
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command,
        "machine": {"cpu": cpu_model(), "logical_cpus": os.cpu_count(), "os": platform.platform()},
        "versions": {
            "ansor-mlir": f"{_version('ansor-mlir')} @ {git_commit(repo)}",
            "python": platform.python_version(),
            **{dist: _version(dist) for dist in ("iree-base-compiler", "iree-base-runtime", "numpy", "torch",
                                                 "apache-tvm", "apache-tvm-ffi")},
        },
        "budgets": budgets,
        "threads": 1,
    }


# --------------------------------------------------------------------------- tables


def _ms(seconds: float | None) -> str:
    return f"{seconds * 1e3:.3f}" if seconds is not None else "-"


def cell_text(cell: Cell | None, fmt: Callable[[Cell], str]) -> str:
    """A measured value, or the cell's status when it did not run correctly."""
    if cell is None:
        return "-"
    return fmt(cell) if cell.status == OK else cell.status


def geomean_rows(report: BenchReport) -> list[tuple[str, list[str]]]:
    rows = []
    for contender in report.contenders:
        values = []
        for baseline in BASELINES:
            if baseline == contender or baseline not in report.contenders:
                values.append("-")
                continue
            g, n = geomean_speedup(report.cells, contender, baseline)
            values.append(f"{g:.2f}x (n={n})" if g is not None else "n/a")
        rows.append((contender, values))
    return rows


def console_table(report: BenchReport) -> Table:
    table = Table(title="median ms per call, timed alternately (1 thread); [x] = speedup vs IREE default")
    table.add_column("workload")
    for contender in report.contenders:
        table.add_column(contender, justify="right")
    for w in report.workloads:
        row = []
        for contender in report.contenders:
            s = speedup(report.cells, w, contender, "IREE default")
            row.append(cell_text(report.cell(w, contender),
                                 lambda c, s=s: _ms(c.median_s) + (f" [{s:.2f}x]" if s else "")))
        table.add_row(w, *row)
    return table


def geomean_table(report: BenchReport) -> Table:
    table = Table(title="geomean speedup (baseline time / contender time)")
    table.add_column("contender")
    for b in BASELINES:
        table.add_column(f"vs {b}", justify="right")
    for contender, values in geomean_rows(report):
        table.add_row(contender, *values)
    return table


# --------------------------------------------------------------------------- files


def write_csv(report: BenchReport, path: Path) -> None:
    names = [f.name for f in fields(Cell)]
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=names)
        writer.writeheader()
        for cell in report.cells:
            writer.writerow(cell.to_dict())


def write_json(report: BenchReport, path: Path) -> None:
    data = {
        "meta": report.meta,
        "roofline": report.roofline.to_dict(),
        "contenders": report.contenders,
        "workloads": report.workloads,
        "cells": [c.to_dict() for c in report.cells],
        "curves": [{"workload": c.workload, "contender": c.contender, "best_s": list(c.best_s)}
                   for c in report.curves],
    }
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def _speedup_plot(report: BenchReport, baseline: str, path: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    others = [c for c in report.contenders if c != baseline]
    data = {c: [speedup(report.cells, w, c, baseline) for w in report.workloads] for c in others}
    data = {c: v for c, v in data.items() if any(x is not None for x in v)}
    if not data:
        return False
    width = 0.8 / len(data)
    fig, ax = plt.subplots(figsize=(max(8.0, 0.9 * len(report.workloads) + 3), 4.5))
    for i, (contender, values) in enumerate(data.items()):
        xs = [j + (i - (len(data) - 1) / 2) * width for j, v in enumerate(values) if v is not None]
        ax.bar(xs, [v for v in values if v is not None], width, label=contender)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(report.workloads)), report.workloads, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(f"speedup vs {baseline} (log)")
    ax.set_title(f"Speedup over {baseline} (higher is better; missing bar = not run or wrong)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _curve_plot(report: BenchReport, path: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = [w for w in report.workloads if any(c.workload == w for c in report.curves)]
    if not workloads:
        return False
    cols = min(3, len(workloads))
    rows = (len(workloads) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.2 * rows), squeeze=False)
    for ax, w in zip(axes.flat, workloads, strict=False):
        for curve in (c for c in report.curves if c.workload == w):
            ax.plot(range(1, len(curve.best_s) + 1), [s * 1e3 for s in curve.best_s], label=curve.contender)
        base = report.cell(w, "IREE default")
        if base is not None and base.status == OK:
            ax.axhline(base.median_s * 1e3, color="gray", linestyle="--", linewidth=0.8, label="IREE default")
        ax.set_title(w, fontsize=9)
        ax.set_xlabel("trial")
        ax.set_ylabel("best ms so far")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(workloads):]:
        ax.axis("off")
    fig.suptitle("Tuning curves (each tuner's own measurements)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_plots(report: BenchReport, out_dir: Path) -> list[Path]:
    """PNG plots; none (with no error) when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return []
    written = []
    for path, ok in (
        (out_dir / "speedup_vs_iree_default.png", lambda p: _speedup_plot(report, "IREE default", p)),
        (out_dir / "speedup_vs_pytorch.png", lambda p: _speedup_plot(report, "PyTorch", p)),
        (out_dir / "tuning_curves.png", lambda p: _curve_plot(report, p)),
    ):
        if ok(path):
            written.append(path)
    return written


# --------------------------------------------------------------------------- markdown


def _speedup_text(report: BenchReport, cell: Cell) -> str:
    s = speedup(report.cells, cell.workload, cell.contender, "IREE default")
    return f"{s:.2f}x" if s else "-"


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _metric_table(report: BenchReport, fmt: Callable[[Cell], str]) -> str:
    rows = [[w, *(cell_text(report.cell(w, c), fmt) for c in report.contenders)]
            for w in report.workloads]
    return _md_table(["workload", *report.contenders], rows)


def render_markdown(report: BenchReport, plots: list[Path], doc_path: Path) -> str:
    m, r = report.meta, report.roofline
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
    b = m["budgets"]
    unavailable = [c for c in report.cells if c.status != OK]
    parts = [
        "# Benchmarks: the Ansor paper suite, batch 1, one thread",
        f"Generated by `{m['command']}` on {m['date']}. Do not edit by hand: rerun the command.",
        "## Setup",
        "\n".join([
            f"- Machine: {m['machine']['cpu']}, {m['machine']['logical_cpus']} logical CPUs, {m['machine']['os']}.",
            f"- Versions: {versions}.",
            f"- Budgets: ansor-mlir {b['trials']} trials per task (IREE's default counts as one); "
            f"TVM MetaSchedule {b['tvm_trials']} trials per op; shapes: {b['shapes']}.",
            "- Threads: 1 everywhere (IREE `local-sync`, `torch.set_num_threads(1)`, "
            "OMP/OPENBLAS/MKL/TVM_NUM_THREADS=1, TVM target `num-cores` 1).",
            f"- Timing: all correct contenders of an op timed alternately in {b['rounds']} rounds of at least "
            f"{b['min_round_ms']} ms each on the same inputs; median per call. The machine is shared and noisy: "
            "compare ratios within a row, not absolute times across runs.",
            "- Correctness: every contender's output is checked against the workload's numpy (float64) reference "
            "first; a mismatch is reported as `wrong` and never timed.",
            "- Layouts: IREE, numpy and TVM take the workloads' own channels-last tensors; PyTorch gets NCHW/OIHW "
            "copies made before timing (its native layout).",
            "- IREE variants: default flags; data tiling `--iree-opt-data-tiling=true`; "
            "DT+ukernels adds `--iree-llvmcpu-enable-ukernels=all`.",
        ]),
        "## Physical limit (one thread)",
        f"- Peak f32: **{r.peak_flops / 1e9:.1f} GFLOP/s** ({r.peak_method}).\n"
        f"- Memory bandwidth: **{r.bandwidth_bytes_s / 1e9:.1f} GB/s** ({r.bandwidth_method}).\n"
        "- Roofline bound of an op = max(FLOPs / peak, compulsory bytes / bandwidth of the smallest level "
        "holding them); "
        "'% of roofline' = bound / measured time.",
        "## Geomean speedups",
        "Baseline time / contender time, over the ops where both ran correctly (n).",
        _md_table(["contender", *(f"vs {x}" for x in BASELINES)],
                  [[c, *values] for c, values in geomean_rows(report)]),
        "## Median time per call (ms)",
        _metric_table(report, lambda c: _ms(c.median_s)),
        "## Speedup vs IREE default",
        _md_table(["workload", *report.contenders],
                  [[w, *(cell_text(report.cell(w, c), lambda x: _speedup_text(report, x)) for c in report.contenders)]
                   for w in report.workloads]),
        "## Achieved GFLOP/s and % of peak",
        _metric_table(report, lambda c: f"{c.gflops:.1f} ({c.pct_peak:.1f}%)"),
        "## % of the roofline bound",
        _metric_table(report, lambda c: f"{c.pct_roofline:.1f}%"),
    ]
    tuned = [c for c in report.cells if c.contender == "ansor-mlir tuned" and c.status == OK]
    if tuned:
        parts += ["## ansor-mlir: the log's speedup beside the program's",
                  "Per tuned task: its speedup over IREE's default timed alone (the tuning log) and in the whole "
                  "program (whole-program verification, alternated against IREE's default build); a task whose "
                  "checked candidates all lost in the program falls back to IREE's default.",
                  _md_table(["workload", "tasks"], [[c.workload, c.note] for c in tuned])]
    if unavailable:
        parts += ["## Not run, and why",
                  "\n".join(f"- {c.workload}, {c.contender}: **{c.status}**: {c.note}" for c in unavailable)]
    if plots:
        parts += ["## Plots", "\n\n".join(f"![{p.stem}]({os.path.relpath(p, doc_path.parent)})" for p in plots)]
    return "\n\n".join(parts) + "\n"

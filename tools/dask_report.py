"""Scale-out on Dask: the README example tuned by the embedded measurers and on a 2-worker LocalCluster,
once with a worker killed mid-run; writes docs/reports/scale_out.md.

    python tools/dask_report.py [--trials 32] [--docs docs/reports/scale_out.md]

Three runs of the same command (same example, trials, seed, each with a
fresh log): the embedded default (`LocalBuilder` + `LocalRunner` on this
host), a `distributed.LocalCluster` of 2 worker processes (one thread each,
`device=1`) named by its scheduler address (`cluster=`), and the same
cluster with one worker killed (SIGKILL) while it measures. The last run must
complete with every budgeted record in the log, none twice, and the killed
measurement re-run by another worker. Throughput is candidates measured per
minute of the whole `api.tune` call. Runs alternate in the order given, once
per round.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from distributed.diagnostics.plugin import SchedulerPlugin  # noqa: E402

import ansor_mlir  # noqa: E402
from ansor_bench.report import cpu_model, git_commit  # noqa: E402
from ansor_mlir import api  # noqa: E402
from ansor_mlir.core.target import detect_host  # noqa: E402
from ansor_mlir.database.records import Record, read_records  # noqa: E402
from ansor_mlir.frontend.target_resolution import resolve_target  # noqa: E402

EXAMPLE = Path(ansor_mlir.__file__).parent / "examples" / "matmul_bias_relu.mlir"
MEASURE_PREFIX = "ansor-measure"


class TaskWorkers(SchedulerPlugin):
    """A scheduler plugin noting, per build or measurement task, the workers that ran it and the one that
    finished it (a killed worker's task is run again elsewhere)."""

    name = "ansor-report-task-workers"

    def __init__(self, scheduler) -> None:
        super().__init__()
        self.ran: dict[str, list[str]] = {}
        self.finished: dict[str, str] = {}
        self.scheduler = scheduler

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        key = str(key)
        if not key.startswith("ansor-"):
            return
        if finish == "processing":
            task = self.scheduler.tasks.get(key)
            on = task.processing_on.address if task is not None and task.processing_on is not None else "?"
            self.ran.setdefault(key, []).append(on)
        elif finish == "memory":
            self.finished[key] = str(kwargs.get("worker", "?"))

    def prefixes(self) -> Counter:
        """Tasks by the prefix Dask's dashboard groups them by (`key_split`)."""
        from distributed.utils import key_split

        return Counter(key_split(key) for key in self.ran)


@dataclass
class Killer:
    """Once `after` records are in, SIGKILL the first worker seen measuring (0.3 s into a measurement)."""

    address: str
    after: int
    measured: int = 0
    killed_worker: str = ""
    killed_key: str = ""
    _stop: threading.Event = field(default_factory=threading.Event)

    def on_note(self, message: str) -> None: ...
    def on_start(self, results, trials) -> None: ...
    def on_task_done(self, result) -> None: ...
    def on_end(self, results) -> None: ...
    def on_round(self, *args) -> None: ...

    def on_measured(self, results, index, records) -> None:
        self.measured += len(records)

    def run(self) -> None:
        from distributed import Client

        with Client(self.address, timeout=10, set_as_default=False) as client:
            seen: dict[str, float] = {}
            while not self._stop.wait(0.1) and not self.killed_key:
                if self.measured < self.after:
                    continue
                now = time.monotonic()
                busy = [(w, str(k)) for w, keys in client.processing().items()
                        for k in keys if str(k).startswith(MEASURE_PREFIX)]
                for worker, key in busy:
                    if now - seen.setdefault(key, now) >= 0.3:
                        pid = client.run(os.getpid, workers=[worker])[worker]
                        os.kill(pid, signal.SIGKILL)
                        self.killed_worker, self.killed_key = worker, key
                        break

    def stop(self) -> None:
        self._stop.set()


@dataclass
class Run:
    name: str
    wall_s: float
    records: list[Record]
    workers: Counter
    killer: Killer | None = None
    tasks: TaskWorkers | None = None
    error: str = ""

    @property
    def search(self) -> list[Record]:
        return [r for r in self.records if r.program is None]

    @property
    def per_minute(self) -> float:
        return 60.0 * len(self.records) / self.wall_s

    @property
    def duplicates(self) -> int:
        counts = Counter((r.candidate.identity, r.program is not None) for r in self.records)
        return sum(n - 1 for n in counts.values())


def tune(name: str, log: Path, trials: int, seed: int, cluster: str | None, killer: Killer | None) -> Run:
    started = time.perf_counter()
    error = ""
    try:
        api.tune(EXAMPLE, resolve_target(detect_host()), trials=trials, log=log, seed=seed, progress=False,
                 cluster=cluster, callbacks=[killer] if killer else [])
    except Exception as exc:  # reported in the table: a run that fails is a finding
        error = f"{type(exc).__name__}: {exc}"
    wall = time.perf_counter() - started
    records = read_records(log)
    workers = Counter(r.result.worker for r in records if r.result.worker)
    return Run(name, wall, records, workers, killer, error=error)


def local_cluster(workers: int):
    from distributed import LocalCluster

    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, resources={"device": 1},
                        dashboard_address=":0", scheduler_port=0)


def on_cluster(name: str, log: Path, trials: int, seed: int, workers: int, kill_after: int | None) -> Run:
    with local_cluster(workers) as cluster:
        tasks = TaskWorkers(cluster.scheduler)
        cluster.scheduler.add_plugin(tasks)
        killer = Killer(cluster.scheduler_address, kill_after) if kill_after is not None else None
        thread = threading.Thread(target=killer.run, daemon=True) if killer else None
        if thread:
            thread.start()
        run = tune(name, log, trials, seed, cluster.scheduler_address, killer)
        run.tasks = tasks
        if killer:
            killer.stop()
            thread.join(timeout=30)
    return run


def report(runs: Sequence[Run], args: argparse.Namespace, command: str) -> str:
    names = list(dict.fromkeys(r.name for r in runs))
    rounds = [runs[i:i + len(names)] for i in range(0, len(runs), len(names))]
    medians = {name: statistics.median(r.per_minute for r in runs if r.name == name) for name in names}
    lines = [
        "# Scale-out on Dask",
        "",
        f"Generated by `{command}` at commit {git_commit(ROOT)} on {platform.node()} ({os.cpu_count()} cores, "
        f"{cpu_model()}), {time.strftime('%Y-%m-%d')}. Rerun it to refresh this page.",
        "",
        f"The README example (`{EXAMPLE.name}`, `bash tools/tune_example.sh` tunes it) tuned with "
        f"`api.tune(trials={args.trials}, seed={args.seed})`, each run with a fresh log: by the embedded "
        "measurers (this host's `LocalBuilder` and `LocalRunner`), and with `cluster=` the scheduler address of "
        f"a `distributed.LocalCluster` of {args.workers} worker processes (one thread and `device=1` each), "
        "once as is and once with one worker killed (SIGKILL) while it measured. Runs alternate, one of each per "
        "round. *Records*: lines in the log (search measurements, IREE's default included, and whole-program "
        "checks); *per minute*: records per minute of the whole `api.tune` call (task extraction, reference, "
        "search, verification).",
        "",
        "| round | run | wall | records | lost | measured twice | per minute | vs embedded (same round) | "
        "by worker | error |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for number, group in enumerate(rounds, 1):
        base = group[0]
        for run in group:
            by = ", ".join(f"{w.removeprefix('tcp://')}: {n}" for w, n in sorted(run.workers.items()))
            lines.append(f"| {number} | {run.name} | {run.wall_s:.0f} s | {len(run.records)} | "
                         f"{max(0, len(base.records) - len(run.records))} | {run.duplicates} | {run.per_minute:.1f} | "
                         f"{run.per_minute / base.per_minute:.2f}x | {by} | {run.error or '-'} |")
    lines += ["", "Median over the rounds, records per minute: " + ", ".join(
        f"{name} {value:.1f} ({value / medians[names[0]]:.2f}x)" for name, value in medians.items()) + ". *Lost*: "
        "records short of the embedded run's in the same round (same budget, same seed)."]
    lines += ["", "## The worker killed mid-run", ""]
    for run in (r for r in runs if r.killer):
        k = run.killer
        expected = [r for r in runs if r.name == "embedded"]
        ran = run.tasks.ran.get(k.killed_key, []) if run.tasks else []
        finished = run.tasks.finished.get(k.killed_key, "-") if run.tasks else "-"
        lines += [
            f"- Killed worker `{k.killed_worker or '(none: no measurement was seen in flight)'}` (SIGKILL) after "
            f"{k.after} records, 0.3 s into its measurement `{k.killed_key}`.",
            f"- That task ran on {', then '.join(f'`{w}`' for w in ran) or '-'} and was finished by `{finished}`; "
            f"{sum(1 for r in run.records if r.result.worker == finished)} records name that worker.",
            f"- The run {'completed' if not run.error else 'failed: ' + run.error}: {len(run.records)} records "
            f"({len(run.search)} search, {len(run.records) - len(run.search)} whole-program checks; the embedded "
            f"run wrote {len(expected[0].records) if expected else '-'}), {run.duplicates} measured twice. The "
            f"LocalCluster's nanny restarted the killed worker ({len(run.workers)} worker addresses in the "
            "records).",
            f"- Tasks by the prefix Dask's dashboard groups them by: "
            f"{', '.join(f'{n}: {c}' for n, c in sorted(run.tasks.prefixes().items())) if run.tasks else '-'}; "
            "tasks the scheduler assigned again after the kill (the measurement and what was queued on the "
            f"killed worker): {sum(1 for w in (run.tasks.ran.values() if run.tasks else []) if len(w) > 1)}.",
        ]
    lines += [
        "",
        "## Reading it",
        "",
        f"This host has {os.cpu_count()} cores, so the cluster cannot be faster: its two workers build and time "
        "on the same cores the embedded run uses (2 parallel builds, then one timing at a time), and two "
        "timings at once share the memory system. The cluster's cost is Dask's per-task overhead, shipping "
        "each program, its inputs and reference outputs as bytes to a worker process, four more Python "
        "processes (two workers, their nannies) on two cores, and a LocalCluster's scheduler running inside "
        "the tuning process, where its event loop competes with the search for the interpreter (a `dask "
        "scheduler` of one's own runs apart). Wall times on a shared 2-core host are noisy: compare the "
        "rounds. On a real cluster, "
        "measurements run one per device worker in parallel and builds on every idle worker, so throughput "
        "grows with the workers until the tuner's own search between batches dominates.",
        "",
        "Dask's dashboard (when the scheduler runs one: `pip install bokeh`) shows the tasks as `ansor-build` "
        "and `ansor-measure` in its progress and task-stream panels; the console's progress bar advances as "
        "each record lands, whichever worker measured it.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--kill-after", type=int, default=6, help="records in before a worker is killed")
    parser.add_argument("--docs", default="docs/reports/scale_out.md")
    args = parser.parse_args()
    command = "python tools/dask_report.py " + " ".join(sys.argv[1:])
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="ansor-dask-report-") as tmp:
        for round_index in range(args.rounds):
            for name, kill in (("embedded", None), ("LocalCluster", None), ("LocalCluster, worker killed",
                                                                              args.kill_after)):
                log = Path(tmp) / f"{round_index}-{len(runs)}.jsonl"
                print(f"round {round_index + 1}: {name} ...", file=sys.stderr, flush=True)
                run = (tune(name, log, args.trials, args.seed, None, None) if name == "embedded" else
                       on_cluster(name, log, args.trials, args.seed, args.workers, kill))
                print(f"  {run.wall_s:.0f} s, {len(run.records)} records, {run.duplicates} twice, "
                      f"workers {dict(run.workers)} {run.error}", file=sys.stderr, flush=True)
                runs.append(run)
    text = report(runs, args, command)
    Path(args.docs).parent.mkdir(parents=True, exist_ok=True)
    Path(args.docs).write_text(text)
    print(json.dumps({"docs": args.docs, "runs": len(runs)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Run the fuzzers long and the interruption experiments, and write docs/reports/reliability.md.

    python3 tools/reliability_report.py                 # about 15 minutes on 2 cores
    python3 tools/reliability_report.py --examples 40 --kills 4 --out /tmp/reliability.md   # a quick look

Bad inputs come from the fuzz tests' generators (tests/py/fuzz_strategies.py): MLIR, pass options and
pipelines through `ansor-opt`, corrupt logs through the log reader, API calls with one bad argument. Each
runs in a child process (so a crash or a hang is seen, not suffered) and is counted as clean (one error
line, non-zero exit; a bad log line skipped with one warning), traceback, crash, hang or silent success.
Then the experiments: tuning runs killed at random moments (kill -9, SIGINT) and resumed; two tuners on
one log; a corrupt-log set; a full disk (a 64 KiB tmpfs, root only) and a log on /dev/full.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import os
import pickle
import platform
import queue
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "py")]

import fuzz_strategies as fz  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import seed as hypothesis_seed  # noqa: E402

PARSE_TIMEOUT_S = 60.0
COMPILE_TIMEOUT_S = 300.0
OUTCOMES = ("clean", "traceback", "crash", "hang", "silent success")


# ---- the child that runs cases ---------------------------------------------------------------------------------


def check_corrupt_log(log: fz.CorruptLog, path: Path) -> list[str]:
    """What is wrong with how the reader handled a corrupt log (nothing, when every bad line was skipped with
    one warning naming it, the good ones kept, and no bad time chosen)."""
    from ansor_mlir.database.records import best_records, read_records

    path.write_bytes(log.data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = read_records(path)
    problems = []
    if records != log.good:
        problems.append(f"kept {len(records)} records, expected the {len(log.good)} good ones")
    warned = [int(str(w.message).split(":")[1]) for w in caught if str(w.message).startswith(str(path))]
    if warned != log.bad_lines:
        problems.append(f"warned about lines {warned}, expected {log.bad_lines} ({log.kinds})")
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        read_records(path)
    if again:
        problems.append("warned again on a second read")
    best = best_records(records, "llvm-cpu:host:t1").get("k1")
    if best is not None and not best.result.median_s > 0:
        problems.append(f"chose a bad time {best.result.median_s}")
    return problems


def run_case(case: dict) -> dict:
    from ansor_mlir import api, cli
    from ansor_mlir.errors import AnsorError

    err = io.StringIO()
    out: dict = {"status": None, "stderr": "", "error": None, "warnings": [], "problems": []}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                if case["kind"] == "cli":
                    out["status"] = cli.main(case["argv"])
                elif case["kind"] == "api":
                    getattr(api, case["function"])(**case["kwargs"])
                    out["status"] = 0
                else:
                    out["problems"] = check_corrupt_log(case["log"], Path(case["path"]))
                    out["status"] = 0
            except SystemExit as exc:
                out["status"] = exc.code
            except AnsorError as exc:
                out["status"] = 1
                print(f"AnsorError: {exc}", file=err)
            except Exception:  # noqa: BLE001 - a traceback is what this harness counts
                out["error"] = traceback.format_exc()
    out["stderr"] = err.getvalue()
    out["warnings"] = [(w.category.__name__, str(w.message)[:300]) for w in caught]
    out["log_written"] = bool(case.get("log_path")) and Path(case["log_path"]).exists()
    return out


def child_main() -> None:
    """Read pickled cases one per line; answer `started` before each and the result after."""
    for line in sys.stdin:
        case = pickle.loads(base64.b64decode(line))
        sys.__stdout__.write("started\n")
        sys.__stdout__.flush()
        result = run_case(case)
        sys.__stdout__.write(base64.b64encode(pickle.dumps(result)).decode() + "\n")
        sys.__stdout__.flush()


class Harness:
    """A child process running cases one at a time; one that dies or stops answering is replaced.

    A thread reads the child's answers into a queue, so a case's time limit is a plain queue timeout.
    """

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.answers: queue.Queue[str | None] = queue.Queue()

    def _start(self) -> subprocess.Popen:
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen([sys.executable, __file__, "--child"], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                            cwd=ROOT)
            self.answers = queue.Queue()
            threading.Thread(target=self._read, args=(self.process, self.answers), daemon=True).start()
        return self.process

    @staticmethod
    def _read(process: subprocess.Popen, answers: queue.Queue) -> None:
        for line in process.stdout:
            answers.put(line)
        answers.put(None)  # the child is gone

    def run(self, case: dict, timeout_s: float) -> dict:
        child = self._start()
        child.stdin.write(base64.b64encode(pickle.dumps(case)).decode() + "\n")
        child.stdin.flush()
        limit = timeout_s + 30.0  # the first case also waits for the child's imports
        for _ in ("started", "result"):
            try:
                line = self.answers.get(timeout=limit)
            except queue.Empty:
                self.close()
                return {"outcome": "hang"}
            if line is None:
                code = child.wait()
                self.process = None
                return {"outcome": "crash", "code": code}
            limit = timeout_s
        return pickle.loads(base64.b64decode(line))

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


def classify(case: dict, result: dict) -> str:
    if result.get("outcome") in ("crash", "hang"):
        return result["outcome"]
    if result["error"] or "Traceback" in result["stderr"]:
        return "traceback"
    if case["kind"] == "log":
        return "silent success" if result["problems"] else "clean"
    leaked = [w for w in result["warnings"] if w[0] == "RuntimeWarning"]
    if result["status"] == 0 or result["log_written"] or leaked:
        return "silent success"
    if case["kind"] == "cli":
        errors = [line for line in result["stderr"].splitlines() if line.startswith("ansor-opt: error:")]
        return "clean" if len(errors) == 1 else "traceback"
    return "clean"


# ---- generating the cases --------------------------------------------------------------------------------------


def draw(strategy, count: int, seed: int) -> list:
    """`count` examples of a strategy (fewer when it has fewer distinct ones)."""
    drawn: list = []

    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @hypothesis_seed(seed)
    @given(strategy)
    def collect(example) -> None:
        drawn.append(example)

    collect()
    return drawn


@dataclass
class Scratch:
    root: Path
    module: Path = field(init=False)
    special: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.module = self.root / "mm.mlir"
        self.module.write_text(fz.VALID)
        fifo = self.root / "fifo"
        os.mkfifo(fifo)
        self.special = {"a FIFO": str(fifo), "a directory": str(self.root), "/dev/full": "/dev/full",
                        "in a missing directory": str(self.root / "missing" / "log.jsonl")}

    def fresh(self, suffix: str) -> Path:
        return self.root / f"{time.monotonic_ns()}-{random.getrandbits(32):08x}{suffix}"


def mlir_cases(scratch: Scratch, count: int, seed: int) -> list[tuple[str, dict, float]]:
    cases = []
    for what, data in draw(fz.bad_modules(), count, seed):
        source = scratch.fresh(".mlir")
        source.write_bytes(data)
        log = scratch.fresh(".jsonl")
        argv = [str(source), f"--ansor-tune=trials=2 log={log} verify=0 progress=0", "-o", os.devnull]
        slow = what in fz.UNSUPPORTED or what in ("zero-size tensor", "huge inputs") or what.endswith("operands")
        cases.append((f"MLIR: {what}", {"kind": "cli", "argv": argv, "log_path": str(log)},
                      COMPILE_TIMEOUT_S if slow else PARSE_TIMEOUT_S))
    return cases


def option_cases(scratch: Scratch, count: int, seed: int) -> list[tuple[str, dict, float]]:
    cases = []
    for what, options in draw(fz.bad_tune_options(scratch.special), count, seed):
        argv = [str(scratch.module), f"--ansor-tune={options}", "-o", os.devnull]
        cases.append((f"option: {what}", {"kind": "cli", "argv": argv}, PARSE_TIMEOUT_S))
    for what, pipeline in draw(fz.bad_pipelines(), count // 2, seed + 1):
        argv = [str(scratch.module), f"--pass-pipeline={pipeline}", "-o", os.devnull]
        cases.append((f"pipeline: {what}", {"kind": "cli", "argv": argv}, PARSE_TIMEOUT_S))
    return cases


def log_cases(scratch: Scratch, count: int, seed: int) -> list[tuple[str, dict, float]]:
    return [("log", {"kind": "log", "log": log, "path": str(scratch.fresh(".jsonl"))}, PARSE_TIMEOUT_S)
            for log in draw(fz.corrupt_logs(), count, seed)]


def api_cases(scratch: Scratch, count: int, seed: int) -> list[tuple[str, dict, float]]:
    cases = []
    for call in draw(fz.bad_api_calls(scratch.module, scratch.root / "api-log.jsonl", scratch.special), count, seed):
        cases.append((f"API: {call.what}", {"kind": "api", "function": call.function, "kwargs": call.kwargs,
                                             "log_path": call.log}, COMPILE_TIMEOUT_S))
    return cases


@dataclass
class FuzzCounts:
    by_area: dict[str, Counter] = field(default_factory=dict)
    kinds: dict[str, Counter] = field(default_factory=dict)
    bad_lines: int = 0
    failures: list[str] = field(default_factory=list)


def run_fuzz(scratch: Scratch, examples: int, seed: int) -> FuzzCounts:
    areas = {"MLIR inputs": mlir_cases(scratch, examples, seed), "pass options and pipelines":
             option_cases(scratch, examples, seed), "log files": log_cases(scratch, examples, seed),
             "API calls": api_cases(scratch, examples, seed)}
    counts = FuzzCounts()
    harness = Harness()
    try:
        for area, cases in areas.items():
            tally = counts.by_area.setdefault(area, Counter())
            kinds = counts.kinds.setdefault(area, Counter())
            for what, case, timeout_s in cases:
                kinds[what.split(": ", 1)[-1]] += 1
                result = harness.run(case, timeout_s)
                outcome = classify(case, result)
                tally[outcome] += 1
                if case["kind"] == "log":
                    counts.bad_lines += len(case["log"].bad_lines)
                    kinds.update(case["log"].kinds)
                if outcome != "clean":
                    counts.failures.append(f"{area} / {what}: {outcome}: {_detail(result)}")
            print(f"{area}: {dict(tally)}", file=sys.stderr)
    finally:
        harness.close()
    return counts


def _detail(result: dict) -> str:
    text = result.get("error") or result.get("problems") or result.get("stderr") or result
    return str(text)[-400:].replace("\n", " | ")


# ---- tuning runs: killed, resumed, shared, starved ---------------------------------------------------------


def tune_child(args: argparse.Namespace) -> int:
    """One tuning run, like `ansor-opt --ansor-tune`, whose runner notes every measurement it completes."""
    from ansor_mlir import api
    from ansor_mlir.errors import AnsorError
    from ansor_mlir.measure.local_runner import LocalRunner
    from ansor_mlir.tuning.tuner import TuneOptions, Tuner

    class WitnessRunner(LocalRunner):
        """Appends a line to the witness file the moment a measurement completes (before the tuner sees it)."""

        def submit(self, item):
            future = super().submit(item)
            if args.witness:
                future.add_done_callback(lambda f: _witness(args.witness, f))
            return future

    target = api.resolve_target("llvm-cpu")
    options = TuneOptions(trials=args.trials, log=Path(args.log), batch_size=args.batch, verify=0, progress=False,
                          seed=args.seed, policy=args.policy)
    tuner = Tuner(target, options, runner=WitnessRunner(target, timeout_s=options.run_timeout_s,
                                                        min_time_s=options.min_time_s))
    try:
        tuner.tune_module(Path(args.module).read_text(), args.module)
    except AnsorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print(str(exc), file=sys.stderr)
        return 130
    return 0


def _witness(path: str, future) -> None:
    """When a measurement completed, and how (a run cut short by the runner's close after a signal counts as
    completed only if it ended before the signal)."""
    error = future.result().measured.error.value if not future.exception() else "exception"
    with open(path, "a") as f:
        f.write(f"{time.time()} {error}\n")
        f.flush()
        os.fsync(f.fileno())


def tuner_command(log: Path, module: Path, trials: int, seed: int = 0, witness: Path | None = None,
                  batch: int = 2, policy: str = "evolutionary") -> list[str]:
    cmd = [sys.executable, __file__, "--tune-child", "--module", str(module), "--log", str(log), "--trials",
           str(trials), "--seed", str(seed), "--batch", str(batch), "--policy", policy]
    return cmd + (["--witness", str(witness)] if witness else [])


def log_lines(path: Path) -> tuple[list, int]:
    """(records, lines the reader skipped) of a log, read in a child so its warnings are counted fresh."""
    from ansor_mlir.database.records import read_records

    if not path.exists():
        return [], 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = read_records(path)
    return records, len(caught)


BUILD_FAILURES = ("invalid_schedule", "compile_error", "compile_timeout")


@dataclass
class KillRun:
    how: str
    after_s: float
    completed: int  # measurements the runner completed before the kill
    logged: int  # of them, in the log after the kill (build failures, which never reach the runner, excluded)
    torn: bool
    resumed_rc: int
    duplicates: int
    total: int
    prefix_kept: bool


def kill_and_resume(scratch: Scratch, module: Path, runs: int, trials: int, seed: int) -> tuple[list[KillRun], float]:
    rng = random.Random(seed)
    probe = scratch.fresh(".jsonl")
    started = time.monotonic()
    subprocess.run(tuner_command(probe, module, trials), check=True, capture_output=True)
    duration = time.monotonic() - started
    out = []
    for index in range(runs):
        how = "kill -9" if index % 2 == 0 else "SIGINT"
        log, witness = scratch.fresh(".jsonl"), scratch.fresh(".witness")
        after = rng.uniform(0.15, 0.95) * duration
        proc = subprocess.Popen(tuner_command(log, module, trials, witness=witness), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(after)
        signalled = time.time()
        proc.send_signal(signal.SIGKILL if how == "kill -9" else signal.SIGINT)
        proc.communicate(timeout=120)
        noted = witness.read_text().splitlines() if witness.exists() else []
        completed = sum(1 for line in noted if float(line.split()[0]) < signalled)
        records, _ = log_lines(log)
        logged = sum(1 for r in records if r.result.error.value not in BUILD_FAILURES)
        torn = how == "kill -9" and index % 4 == 0  # a write torn by the kill, as it would be mid-line
        if torn:
            with open(log, "ab") as f:
                f.write(b'{"version": 3, "target": "llvm-cpu:host:t1", "task": "0cd7')
        before = log.read_bytes() if log.exists() else b""
        resumed = subprocess.run(tuner_command(log, module, trials), capture_output=True, text=True, timeout=900)
        records, _ = log_lines(log)
        identities = [r.candidate.identity for r in records]
        out.append(KillRun(how, after, completed, logged, torn, resumed.returncode,
                           len(identities) - len(set(identities)), len(identities),
                           log.read_bytes().startswith(before)))
        print(f"kill {index}: {out[-1]}", file=sys.stderr)
    return out, duration


@dataclass
class SharedRun:
    records_shared: int
    duplicates: int
    best_shared: tuple[str, float]
    records_alone: int
    best_alone: tuple[str, float]
    rcs: tuple[int, ...]
    wall_shared_s: float
    wall_alone_s: float


def best_of(log: Path) -> tuple[str, float]:
    from ansor_mlir.database.records import best_records

    records, _ = log_lines(log)
    (best,) = best_records(records, records[0].target, records[0].fingerprint).values()
    return f"s{best.candidate.sketch_index} {dict(best.candidate.values)}", best.result.median_s


def two_tuners(scratch: Scratch, module: Path, trials: int, seed: int) -> SharedRun:
    shared, alone = scratch.fresh(".jsonl"), scratch.fresh(".jsonl")
    started = time.monotonic()
    procs = [subprocess.Popen(tuner_command(shared, module, trials, seed=seed, policy="random"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    rcs = tuple(p.wait(timeout=900) for p in procs)
    wall_shared = time.monotonic() - started
    started = time.monotonic()
    subprocess.run(tuner_command(alone, module, trials, seed=seed, policy="random"), check=True, capture_output=True)
    wall_alone = time.monotonic() - started
    records, _ = log_lines(shared)
    identities = [r.candidate.identity for r in records]
    return SharedRun(len(records), len(identities) - len(set(identities)), best_of(shared),
                     len(log_lines(alone)[0]), best_of(alone), rcs, wall_shared, wall_alone)


@dataclass
class Starved:
    name: str
    rc: int
    message: str
    max_rss_mb: float
    wall_s: float
    log_valid: str
    resumed: str = ""


def run_measured(cmd: list[str], timeout_s: float = 900) -> tuple[int, str, float, float]:
    """(exit status, last stderr line, peak RSS in MiB of the process, seconds) of a command."""
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, text=True)
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        lines = [line for line in err.read().splitlines() if line.strip()]
    return proc.returncode, (lines[-1] if lines else ""), usage.ru_maxrss / 1024, time.monotonic() - started


def validity(log: Path) -> str:
    if not log.exists():
        return "no log"
    records, skipped = log_lines(log)
    data = log.read_bytes()
    whole = not data or data.endswith(b"\n")
    return f"{len(records)} records, {skipped} lines skipped, ends with a whole line: {whole}"


def disk_full(scratch: Scratch, module: Path) -> Starved | None:
    """A 64 KiB tmpfs holding the log, nearly filled; then space is freed and the run resumed."""
    if os.geteuid() != 0:
        return None
    mount = scratch.root / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)]).returncode:
        return None
    try:
        filler = mount / "filler"
        filler.write_bytes(b"\0" * (64 * 1024 - 8 * 1024))
        log = mount / "log.jsonl"
        rc, message, rss, wall = run_measured(tuner_command(log, module, 24, batch=4))
        valid = validity(log)
        filler.unlink()
        resumed = subprocess.run(tuner_command(log, module, 24, batch=4), capture_output=True, text=True)
        records, _ = log_lines(log)
        identities = [r.candidate.identity for r in records]
        after = (f"exit {resumed.returncode}, {len(records)} records, "
                 f"{len(identities) - len(set(identities))} measured twice")
        return Starved("disk full (64 KiB tmpfs)", rc, message, rss, wall, valid, after)
    finally:
        subprocess.run(["umount", str(mount)])


def dev_full(scratch: Scratch, module: Path) -> list[Starved]:
    link = scratch.root / "to-dev-full.jsonl"
    link.symlink_to("/dev/full")
    out = []
    for name, log in (("log=/dev/full", "/dev/full"), ("log = a symlink to /dev/full", str(link))):
        cmd = [sys.executable, "-m", "ansor_mlir.cli", str(module), f"--ansor-tune=trials=4 log={log} progress=0",
               "-o", os.devnull]
        rc, message, rss, wall = run_measured(cmd, timeout_s=300)
        out.append(Starved(name, rc, message, rss, wall, "(a device: nothing written)"))
    return out


@dataclass
class BadTimes:
    logs: int
    chosen: int


def bad_time_set(scratch: Scratch) -> BadTimes:
    """Logs whose fastest line has a zero, negative, NaN or infinite time: that line is never chosen."""
    from ansor_mlir.database.records import best_records, read_records

    chosen = logs = 0
    for bad in (0.0, -1e-6, -1.0, float("nan"), float("inf"), float("-inf"), 1e-300 * -1):
        for position in range(3):
            records = [fz.good_record(t, 2 ** (i + 1)) for i, t in enumerate((3.0, 2.0, 4.0))]
            lines = [r.to_json() for r in records]
            data = json.loads(lines[position])
            data["result"]["median_s"] = bad
            lines[position] = json.dumps(data, allow_nan=True)
            path = scratch.fresh(".jsonl")
            path.write_text("\n".join(lines) + "\n")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                best = best_records(read_records(path), "llvm-cpu:host:t1")["k1"]
            logs += 1
            chosen += not (best.result.median_s > 0 and best.result.median_s != bad)
    return BadTimes(logs, chosen)


# ---- the report ----------------------------------------------------------------------------------------------


def write_report(out: Path, command: str, fuzz: FuzzCounts, kills: list[KillRun], duration: float,
                 shared: list[SharedRun], starved: list[Starved], bad_times: BadTimes, elapsed_s: float) -> None:
    total = Counter()
    for tally in fuzz.by_area.values():
        total.update(tally)
    lines = [
        "# Reliability",
        "",
        f"Generated by `{command}` ({time.strftime('%Y-%m-%d')}, {platform.node()}, {os.cpu_count()} cores, "
        f"{elapsed_s / 60:.0f} min). Rerun it to refresh this page.",
        "",
        "## Bad inputs",
        "",
        "Generated by the fuzz tests' strategies (`tests/py/fuzz_strategies.py`; CI runs a small fixed sample in "
        "`tests/py/test_fuzz.py`), each run in a child process. *Clean*: one `AnsorError` line and a non-zero "
        "exit (a bad log line: skipped with one warning naming its line, a bad time never chosen). A *silent "
        "success* is a bad input accepted: exit 0, a log written by a call that should have been refused, a "
        "numpy warning leaked.",
        "",
        "| area | inputs | " + " | ".join(OUTCOMES) + " |",
        "| --- | ---: | " + " | ".join("---:" for _ in OUTCOMES) + " |",
    ]
    for area, tally in fuzz.by_area.items():
        lines.append(f"| {area} | {sum(tally.values())} | " + " | ".join(str(tally[o]) for o in OUTCOMES) + " |")
    lines.append(f"| **all** | **{sum(total.values())}** | " + " | ".join(f"**{total[o]}**" for o in OUTCOMES)
                 + " |")
    lines += ["", f"The log files held {fuzz.bad_lines} bad lines among good ones. What was generated, by kind:", ""]
    for area, kinds in fuzz.kinds.items():
        shown = ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]) if kind != "log")
        lines.append(f"- {area}: {shown}")
    if fuzz.failures:
        lines += ["", "Failures:", ""] + [f"- {f}" for f in fuzz.failures[:50]]
    lost = sum(max(0, k.completed - k.logged) for k in kills)
    lines += [
        "",
        "## Killed and resumed",
        "",
        f"{len(kills)} runs of a 64x64x64 matmul (trials 8, batch 2, verify 0; an unkilled run takes "
        f"{duration:.0f} s here) killed at a random moment, half by kill -9 and half by SIGINT, then rerun with "
        "the same command. *Completed*: measurements the runner finished before the signal (each noted with its "
        "time in a witness file the moment its future completed, before the tuner saw it; a run the stopping "
        "runner cuts short after the signal is not one); *logged*: of them, in the log. "
        "Torn: a partial line appended after the kill, as a kill during a write leaves one.",
        "",
        "| run | signal | after | completed | logged | torn line | resumed | records | measured twice | "
        "log kept as it was |",
        "| ---: | --- | ---: | ---: | ---: | --- | --- | ---: | ---: | --- |",
    ]
    for i, k in enumerate(kills):
        lines.append(f"| {i} | {k.how} | {k.after_s:.1f} s | {k.completed} | {k.logged} | {'yes' if k.torn else ''} "
                     f"| exit {k.resumed_rc} | {k.total} | {k.duplicates} | {k.prefix_kept} |")
    lines += ["", f"Completed measurements missing from the log: **{lost}**; measured twice after resuming: "
              f"**{sum(k.duplicates for k in kills)}**; resumes that failed: "
              f"**{sum(k.resumed_rc != 0 for k in kills)}**."]
    lines += [
        "",
        "## Two tuners on one log",
        "",
        "Two processes started together on one log (trials 8 each, random policy, the same seed: they propose the "
        "same candidates in the same order), beside one tuner alone on its own log with the same seed; three "
        "seeds. The budget is the log's: together the two fill it once, each claiming its batch before measuring "
        "it, so the second draws other candidates when the first holds its picks. Which of close candidates is "
        "best is decided by timings within the noise (a few percent on this shared host).",
        "",
        "| seed | tuners | exits | records | measured twice | best record | its time | wall |",
        "| ---: | --- | --- | ---: | ---: | --- | ---: | ---: |",
    ]
    for seed, run in enumerate(shared):
        lines.append(f"| {seed} | two, one log | {run.rcs} | {run.records_shared} | {run.duplicates} | "
                     f"{run.best_shared[0]} | {run.best_shared[1] * 1e6:.1f} us | {run.wall_shared_s:.0f} s |")
        lines.append(f"| {seed} | one alone | (0,) | {run.records_alone} | 0 | {run.best_alone[0]} | "
                     f"{run.best_alone[1] * 1e6:.1f} us | {run.wall_alone_s:.0f} s |")
    same = sum(run.best_shared[0] == run.best_alone[0] for run in shared)
    lines += [
        "",
        f"Measured twice: **{sum(run.duplicates for run in shared)}**. Same best record as the tuner alone: "
        f"**{same} of {len(shared)}** seeds.",
        "",
        "## Bad times in a log",
        "",
        f"{bad_times.logs} logs of three records whose one bad time (0, negative, NaN, +-infinity) sits first, "
        f"second or third: a bad time chosen as the best **{bad_times.chosen}** times.",
        "",
        "## No space left",
        "",
        "| case | exit | message | peak memory | wall | log afterwards | after freeing space |",
        "| --- | ---: | --- | ---: | ---: | --- | --- |",
    ]
    for s in starved:
        lines.append(f"| {s.name} | {s.rc} | {s.message[:220]} | {s.max_rss_mb:.0f} MiB | {s.wall_s:.1f} s | "
                     f"{s.log_valid} | {s.resumed} |")
    out.write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=150, help="generated inputs per area (default 150)")
    parser.add_argument("--kills", type=int, default=20, help="tuning runs killed and resumed (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "reports" / "reliability.md")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tune-child", action="store_true", help=argparse.SUPPRESS)
    for name in ("--module", "--log", "--witness", "--policy"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    for name in ("--trials", "--batch"):
        parser.add_argument(name, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main()
        return 0
    if args.tune_child:
        return tune_child(args)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ansor-reliability-") as tmp:
        scratch = Scratch(Path(tmp))
        module = scratch.module
        fuzz = run_fuzz(scratch, args.examples, args.seed)
        kills, duration = kill_and_resume(scratch, module, args.kills, trials=8, seed=args.seed)
        shared = [two_tuners(scratch, module, trials=8, seed=seed) for seed in range(3)]
        starved = [s for s in [disk_full(scratch, module)] if s] + dev_full(scratch, module)
        bad_times = bad_time_set(scratch)
    command = "python3 tools/reliability_report.py" + (f" --examples {args.examples}" if args.examples != 150 else "") \
        + (f" --kills {args.kills}" if args.kills != 20 else "")
    write_report(args.out, command, fuzz, kills, duration, shared, starved, bad_times, time.monotonic() - started)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The tuning log as a small database: appended per measurement, shared under a lock, never left invalid."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import matmul_bias_relu
from fuzz_strategies import good_record

from ansor_mlir import api
from ansor_mlir.database.records import Claim, TuningLog, claim_target, read_records
from ansor_mlir.errors import AnsorError
from ansor_mlir.tuning.callbacks import TuningCallback
from ansor_mlir.tuning.tuner import TuneOptions

TARGET = claim_target("llvm-cpu:host:t1", "")


def candidates(*tiles: int):
    return [good_record(1.0, t).candidate for t in tiles]


def test_claims_keep_two_runs_apart_and_count_toward_the_budget(tmp_path):
    log = tmp_path / "log.jsonl"
    first, second = TuningLog(log), TuningLog(log)
    a, b, c, d = candidates(2, 4, 8, 16)
    assert first.claim(TARGET, [a, b]) == {a.identity, b.identity}
    assert second.claim(TARGET, [b, c]) == {c.identity}  # b is the first run's
    _, claims = second.refresh()
    assert {x.identity for x in claims} == {a.identity, b.identity}
    first.append([good_record(1.0, 2)])  # a measured: in the log now, no longer a claim
    records, claims = second.refresh()
    assert [r.candidate for r in records] == [a] and {x.identity for x in claims} == {b.identity}
    # A budget of 3 records for the task: a (logged), b and c (claimed) leave no room for d.
    assert second.claim(TARGET, [d], budget=3) == set()
    first.release()
    assert second.claim(TARGET, [d], budget=3) == {d.identity}
    second.release()
    assert not Path(str(log) + ".claims").exists()


def test_a_dead_runs_claims_lapse(tmp_path):
    log = tmp_path / "log.jsonl"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (a,) = candidates(2)
    stale = Claim("killed-run", dead.pid, os.uname().nodename, time.time(), TARGET, a.task_key, a.identity)
    Path(str(log) + ".claims").write_text(stale.to_json() + "\n")
    assert TuningLog(log).claim(TARGET, [a]) == {a.identity}


def test_an_append_after_a_torn_line_starts_a_new_line(tmp_path):
    log = tmp_path / "log.jsonl"
    TuningLog(log).append([good_record(2.0, 2)])
    with open(log, "ab") as f:
        f.write(b'{"version": 3, "tar')  # killed mid-write
    with pytest.warns(UserWarning, match=r"log\.jsonl:2: skipping corrupt record \(an unfinished last line"):
        assert len(read_records(log)) == 1
    TuningLog(log).append([good_record(1.0, 4)])
    lines = log.read_bytes().split(b"\n")
    assert lines[1] == b'{"version": 3, "tar' and json.loads(lines[2])["result"]["median_s"] == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the torn line was reported once already
        assert [r.result.median_s for r in read_records(log)] == [2.0, 1.0]


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_log_that_is_not_a_regular_file_is_refused_at_once(tmp_path, kind):
    path = {"fifo": tmp_path / "fifo", "device": Path("/dev/full"), "directory": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    with pytest.raises(AnsorError, match="not a regular file"):
        TuningLog(path)
    with pytest.raises(AnsorError, match="not a regular file"):
        read_records(path)


WRITE_UNTIL_FULL = """
import resource, signal, sys
from fuzz_strategies import good_record
from ansor_mlir.database.records import TuningLog
from ansor_mlir.errors import AnsorError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing us
log = TuningLog(sys.argv[1])
log.append([good_record(1.0, 2)])
resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))
try:
    for i in range(100):
        log.append([good_record(1.0 + i, 2 ** (i % 6 + 1))])
except AnsorError as exc:
    print(exc)
"""


def test_a_failed_write_stops_with_a_clear_message_and_leaves_the_log_valid(tmp_path):
    """A file-size limit stands in for a full disk: the write that fails is undone to the last whole line."""
    log = tmp_path / "log.jsonl"
    done = subprocess.run([sys.executable, "-c", WRITE_UNTIL_FULL, str(log)], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).parent)
    assert "cannot write tuning log" in done.stdout and "rerun with the same log to resume" in done.stdout, done
    data = log.read_bytes()
    assert data.endswith(b"\n") and len(data) <= 3000
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every line a whole record
        assert len(read_records(log)) == data.count(b"\n") >= 1


class LogWatcher(TuningCallback):
    """At each report, what the log holds: each record must already be in it, one at a time."""

    def __init__(self, log: Path):
        self.log = log
        self.seen: list[tuple[int, int]] = []

    def on_measured(self, results, index, records):
        in_log = {r.candidate.identity for r in read_records(self.log)}
        assert all(r.candidate.identity in in_log for r in records)
        self.seen.append((len(records), len(in_log)))


def test_each_measurement_is_logged_as_it_completes(tmp_path, target):
    log = tmp_path / "log.jsonl"
    watcher = LogWatcher(log)
    module = matmul_bias_relu(64, 64, 64)
    api.tune(module, target, options=TuneOptions(trials=5, log=log, batch_size=4, verify=0, progress=False,
                                                  policy="random"), callbacks=[watcher])
    # The default first, then a batch of 4 reported record by record, the log one line longer each time.
    assert watcher.seen == [(1, 2), (1, 3), (1, 4), (1, 5)]


def test_two_tuners_on_one_log_never_measure_a_candidate_twice(tmp_path, target):
    log = tmp_path / "log.jsonl"
    module = matmul_bias_relu(64, 64, 64)
    options = TuneOptions(trials=7, log=log, batch_size=2, verify=0, progress=False, policy="random")
    errors: list[BaseException] = []

    def tune(seed: int) -> None:
        try:
            api.tune(module, target, options=replace(options, seed=seed))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=tune, args=(0,)), threading.Thread(target=tune, args=(0,))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert not errors
    identities = [r.candidate.identity for r in read_records(log)]
    assert len(identities) == len(set(identities)) == 7  # the budget is the log's, shared: 7 in all

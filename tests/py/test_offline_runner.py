"""Measuring where only files travel: export a batch, time it in a process that has no compiler, import it.

The offline round trip must choose what measuring here chooses for the same
candidates: IREE's default, a decent candidate and a deliberately slow one
(1-element register tiles, many times slower), so the ranking is stable on a
noisy machine. The offline runner runs in a subprocess in which importing
`iree.compiler` or `xgboost` fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ansor_mlir.core.schedule import Candidate, Family
from ansor_mlir.database.records import best_records, read_records
from ansor_mlir.errors import AnsorError
from ansor_mlir.measure.batch_bundle import read_batch
from ansor_mlir.measure.local_runner import LocalRunner
from ansor_mlir.measure_cli import main as measure_main
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.batch_export import export_candidates, import_results
from ansor_mlir.tuning.tuner import TuneOptions

# Runs the offline runner with the compiler and the cost model's library unimportable.
NO_COMPILER = """
import sys
class Blocked:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] == "xgboost" or name.startswith("iree.compiler"):
            raise ImportError(f"{name} is not available on the measuring host")
sys.meta_path.insert(0, Blocked)
from ansor_mlir.measure import offline_runner
code = offline_runner.main(sys.argv[1:])
assert not [m for m in sys.modules if m.startswith(("iree.compiler", "xgboost"))]
sys.exit(code)
"""


def run_offline(batch: Path, results: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NO_COMPILER, str(batch), str(results), "--min-time-s", "0.05"],
                          capture_output=True, text=True, timeout=600)


def test_offline_round_trip_chooses_what_local_measurement_chooses(small_task, target, tmp_path: Path):
    task = small_task
    sketches = generate_sketches(task, target)
    slow_sketch = next(s for s in sketches if s.family is Family.PIPELINE and s.knobs
                       and "cache" not in "".join(s.levels))
    slow = Candidate(task.key, slow_sketch.index, tuple(sorted((k.name, tuple(1 for _ in k.levels))
                                                                for k in slow_sketch.knobs)))
    # Slow as well, with whole-extent workgroups: one more program, never close to the default.
    slower = Candidate(task.key, slow_sketch.index, tuple(sorted(
        (k.name, (k.extent, *(1 for _ in k.levels[1:]))) for k in slow_sketch.knobs)))
    chosen = [(task, sketches[0], Candidate(task.key, 0, ())), (task, slow_sketch, slow), (task, slow_sketch, slower)]
    options = TuneOptions(log=tmp_path / "log.jsonl", progress=False)
    batch_path = tmp_path / "batch.zip"
    summary = export_candidates(chosen, target, options, batch_path)
    assert summary.programs == 3 and summary.failed == 0
    batch = read_batch(batch_path)

    with LocalRunner(target, min_time_s=0.05) as runner:
        local = [runner.submit(item.run).result().measured for item in batch.items]
    assert all(m.ok for m in local)
    local_best = min(range(3), key=lambda i: local[i].median_s)

    results = tmp_path / "results.jsonl"
    done = run_offline(batch_path, results)
    assert done.returncode == 0, done.stderr
    assert "measured 3 of 3" in done.stdout
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert [line["id"] for line in lines] == [item.id for item in batch.items]
    assert all(line["result"]["error"] == "none" for line in lines)

    records = import_results(batch_path, results, options.log)
    assert len(records) == 3 and all(r.ok for r in records)
    offline = {r.candidate.identity: r.result.median_s for r in records}
    assert offline[slow.identity] > 2 * min(offline.values())  # the slow candidate is slow there too
    best = best_records(read_records(options.log), target.key, target.fingerprint)[task.key]
    assert best.candidate == chosen[local_best][2]

    # Rerunning with the same results file measures nothing again.
    again = run_offline(batch_path, results)
    assert again.returncode == 0 and "measured 0 of 3" in again.stdout


def test_cli_export_and_import_errors(small_mm, tmp_path: Path, capsys):
    source = tmp_path / "mm.mlir"
    source.write_text(small_mm)
    batch = tmp_path / "batch"
    assert measure_main(["export", str(source), "-o", str(batch), "--log", str(tmp_path / "l.jsonl"),
                         "--candidates", "1"]) == 0
    assert "exported" in capsys.readouterr().out
    items = read_batch(batch).items
    assert items and items[0].record["sketch"]["index"] == 0  # IREE's default first
    assert measure_main(["export", str(source), "-o", str(batch)]) == 1
    assert "already holds a batch" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "nope", "result": {"error": "none", "median_s": 1.0}}) + "\n")
    assert measure_main(["import", str(batch), str(bad), "--log", str(tmp_path / "l.jsonl")]) == 1
    assert "is not in batch" in capsys.readouterr().err
    with pytest.raises(AnsorError, match="not a batch"):
        read_batch(tmp_path)

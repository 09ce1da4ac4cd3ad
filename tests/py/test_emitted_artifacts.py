"""The tuning spec and transform library built from a log, used by plain `iree-compile` as the README says.

The log is written by the test (one pipeline winner, one transform winner), so both artifacts are always built,
whatever a short search would have found; IREE compiles them, the programs run, and their outputs match numpy.
"""

from __future__ import annotations

import random
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ansor_mlir import api
from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.schedule import Candidate, Family
from ansor_mlir.database.records import Record, append_records, now
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.compare import run_once
from ansor_mlir.mlir.iree_compiler import tool_path, tuning_spec_flags
from ansor_mlir.space.annotation import sample_candidate
from ansor_mlir.space.resolve import render_config
from ansor_mlir.space.sketch_rules import generate_sketches

M = N = K = 128


def _record(target, task, sketch, candidate: Candidate, median_s: float) -> Record:
    return Record(target.key, task.key, task.name, candidate, sketch, render_config(sketch, candidate, task),
                  task.root_index, MeasureResult(ErrorKind.NONE, median_s=median_s, spread_s=0.0), now(),
                  fingerprint=target.fingerprint)


def _winner(target, task, family: Family, seed: int = 0) -> Record:
    """A sampled valid candidate of the first non-default sketch of `family`, logged as 1000x IREE's default."""
    sketch = next(s for s in generate_sketches(task, target) if s.family is family and s.knobs)
    candidate = sample_candidate(sketch, task, target, random.Random(seed))
    assert candidate is not None, sketch.name
    return _record(target, task, sketch, candidate, 1e-6)


@pytest.fixture(scope="module")
def source(small_mm, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("emitted") / "mm.mlir"
    path.write_text(small_mm)
    return path


def _log(tmp_path: Path, target, small_mm: str, family: Family) -> tuple[Path, Record]:
    (task,) = [t for t in extract_tasks(small_mm, target, "mm") if t.tunable]
    default = _record(target, task, generate_sketches(task, target)[0], Candidate(task.key, 0, ()), 1e-3)
    winner = _winner(target, task, family)
    log = tmp_path / f"{family.value}.jsonl"
    append_records(log, [default, winner])
    return log, winner


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(shape, dtype=np.float32) for shape in ((M, K), (K, N), (N,))]


def _iree_compile(flags: list[str], source: Path, out: Path) -> None:
    done = subprocess.run([tool_path("iree-compile"), *flags, str(source), "-o", str(out)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def _assert_runs_like_numpy(vmfb: Path, function: str = "mm") -> None:
    a, b, bias = _inputs()
    (got,) = run_once(vmfb.read_bytes(), function, [a, b, bias])
    np.testing.assert_allclose(got, np.maximum(a @ b + bias, 0.0), rtol=1e-4, atol=1e-4)


def test_a_pipeline_winner_configures_iree_through_the_emitted_spec(tmp_path, small_mm, source, target):
    log, winner = _log(tmp_path, target, small_mm, Family.PIPELINE)
    spec = tmp_path / "spec.mlir"
    spec.write_text(api.emit_tuning_spec(source, log, target))
    assert "ansor_match" in spec.read_text()
    configured = subprocess.run([tool_path("iree-compile"), *target.compile_flags(), *tuning_spec_flags(spec),
                                 "--compile-to=executable-configurations", str(source)],
                                capture_output=True, text=True, timeout=600)
    assert configured.returncode == 0, configured.stderr[-3000:]
    distribution = ", ".join(map(str, winner.config.level("distribution")))
    assert re.search(rf"distribution = \[{distribution}\]", configured.stdout)
    vmfb = tmp_path / "spec.vmfb"
    _iree_compile([*target.compile_flags(), *tuning_spec_flags(spec)], source, vmfb)
    _assert_runs_like_numpy(vmfb)


def test_a_transform_winner_builds_through_the_spec_and_through_the_transform_library(
        tmp_path, small_mm, source, target):
    log, winner = _log(tmp_path, target, small_mm, Family.TRANSFORM)
    library = tmp_path / "library.mlir"
    library.write_text(api.emit_transform_library(source, log, target))
    assert "@__kernel_config" in library.read_text() and "@ansor_strategy_" in library.read_text()
    via_library = tmp_path / "library.vmfb"
    _iree_compile([*target.compile_flags(), f"--iree-codegen-transform-dialect-library={library}"], source,
                  via_library)
    _assert_runs_like_numpy(via_library)

    spec = tmp_path / "spec.mlir"
    spec.write_text(api.emit_tuning_spec(source, log, target))
    via_spec = tmp_path / "spec.vmfb"
    _iree_compile([*target.compile_flags(), *tuning_spec_flags(spec)], source, via_spec)
    _assert_runs_like_numpy(via_spec)
    # Both routes hand the dispatch to the logged strategy, not to IREE's own pipeline.
    for flags in ([f"--iree-codegen-transform-dialect-library={library}"], tuning_spec_flags(spec)):
        configured = subprocess.run([tool_path("iree-compile"), *target.compile_flags(), *flags,
                                     "--compile-to=executable-configurations", str(source)],
                                    capture_output=True, text=True, timeout=600)
        assert configured.returncode == 0, configured.stderr[-3000:]
        assert re.search(r"transform_dialect_codegen\s+codegen_spec\s*=\s*@ansor_strategy_", configured.stdout), (
            flags, configured.stdout[-2000:])

"""Property-based fuzzing of every input boundary: MLIR, pass options, log lines, API arguments.

A bounded, derandomized sample runs here (well under a minute);
`tools/reliability_report.py` runs the same generators long, in a child
process that may crash or hang, and writes the counts to docs/reports/reliability.md.
Every input drawn is bad: it must get one `AnsorError` line naming it and a
non-zero exit (a bad log line: a skip with one warning naming its line),
never a traceback or a silent success.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import uuid
import warnings
from pathlib import Path

import pytest
from fuzz_strategies import (
    VALID,
    bad_api_calls,
    bad_pipelines,
    bad_tune_options,
    best_time,
    corrupt_logs,
    unparsable_modules,
    unsupported_modules,
)
from hypothesis import HealthCheck, given, settings

from ansor_mlir import api, cli
from ansor_mlir.database.records import best_records, read_records
from ansor_mlir.errors import AnsorError

# ANSOR_FUZZ_EXAMPLES=N draws N random examples per property instead of the CI's fixed sample.
EXAMPLES = int(os.environ.get("ANSOR_FUZZ_EXAMPLES", "0"))
FAST = settings(max_examples=EXAMPLES or 150, deadline=None, derandomize=not EXAMPLES, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
# A scratch directory for the whole module: strategies are built at import time and name files in it.
SCRATCH = Path(tempfile.mkdtemp(prefix="ansor-fuzz-"))
MODULE = SCRATCH / "mm.mlir"
MODULE.write_text(VALID)
FIFO = SCRATCH / "fifo"
os.mkfifo(FIFO)
SPECIAL_PATHS = {"a FIFO": str(FIFO), "a directory": str(SCRATCH), "/dev/full": "/dev/full",
                 "in a missing directory": str(SCRATCH / "missing" / "log.jsonl")}


def run_cli(argv: list[str]) -> tuple[int, str]:
    """`ansor-opt` in this process: (exit status, stderr); an exception other than SystemExit is a bug."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = cli.main(argv)
        except SystemExit as exc:  # argparse's own exit
            status = exc.code
    return status, err.getvalue()


def assert_one_line_error(status: int, stderr: str, what: str) -> None:
    assert status == 1, f"{what}: exit {status}, expected 1 (stderr: {stderr!r})"
    errors = [line for line in stderr.splitlines() if line.startswith("ansor-opt: error:")]
    assert len(errors) == 1, f"{what}: expected one error line, got {stderr!r}"
    assert "Traceback" not in stderr


def fresh_log() -> Path:
    return SCRATCH / f"log-{uuid.uuid4().hex}.jsonl"


@FAST
@given(unparsable_modules())
def test_bad_mlir_gets_one_error_line(case):
    """Unparsable, nested too deep (MLIR's parser would crash), not text: one line, exit 1, nothing logged."""
    what, data = case
    source = SCRATCH / f"in-{uuid.uuid4().hex}.mlir"
    source.write_bytes(data)
    log = fresh_log()
    status, stderr = run_cli([str(source), f"--ansor-tune=trials=2 log={log} verify=0 progress=0"])
    assert_one_line_error(status, stderr, what)
    assert not log.exists()


@settings(max_examples=max(EXAMPLES // 10, 12), deadline=None, derandomize=not EXAMPLES, database=None)
@given(unsupported_modules())
def test_nothing_to_tune_is_an_error(case):
    """A function of scalars, a zero-size tensor, huge inputs, i4 operands...: said, exit 1, nothing measured."""
    what, text = case
    source = SCRATCH / f"in-{uuid.uuid4().hex}.mlir"
    source.write_text(text)
    log = fresh_log()
    status, stderr = run_cli([str(source), f"--ansor-tune=trials=2 log={log} verify=0 progress=0"])
    assert_one_line_error(status, stderr, what)
    assert not log.exists()


@FAST
@given(bad_tune_options(SPECIAL_PATHS))
def test_bad_pass_options_are_named(case):
    what, options = case
    status, stderr = run_cli([str(MODULE), f"--ansor-tune={options}"])
    assert_one_line_error(status, stderr, what)
    assert "ansor-tune" in stderr


@FAST
@given(bad_pipelines())
def test_bad_pipelines_are_syntax_errors(case):
    what, pipeline = case
    status, stderr = run_cli([str(MODULE), f"--pass-pipeline={pipeline}"])
    assert_one_line_error(status, stderr, what)


@FAST
@given(corrupt_logs())
def test_a_corrupt_log_keeps_its_good_lines_and_never_chooses_a_bad_time(log):
    path = SCRATCH / f"corrupt-{uuid.uuid4().hex}.jsonl"
    path.write_bytes(log.data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = read_records(path)
    assert records == log.good
    warned = [int(str(w.message).split(":")[1]) for w in caught]
    assert warned == log.bad_lines, (log.kinds, [str(w.message)[:200] for w in caught])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per line per process
        read_records(path)
    best = best_records(records, "llvm-cpu:host:t1").get("k1")
    expected = best_time(log.good)
    if expected is None:
        assert best is None
    else:
        assert best.result.median_s <= 1.5 * expected  # noise-aware choice; never a bad (zero, NaN) time
        assert best.result.median_s > 0


@FAST
@given(bad_api_calls(MODULE, SCRATCH / "api-log.jsonl", SPECIAL_PATHS))
def test_bad_api_arguments_raise_ansor_errors_before_writing(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(AnsorError):
            getattr(api, call.function)(**call.kwargs)
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]
    if call.log:
        assert not Path(call.log).exists(), f"{call.what}: the log was written"


def test_a_path_is_never_taken_for_text_nor_text_for_a_path():
    with pytest.raises(AnsorError, match="no such file"):
        api.read_source("ansor_mlir/examples/x.mlir")
    assert api.read_source(str(MODULE))[0] == VALID
    assert api.read_source(MODULE)[0] == VALID
    assert api.read_source(VALID)[0] == VALID  # text, even though it mentions .mlir nowhere
    with pytest.raises(AnsorError, match="no such file"):
        api.read_source(Path("func.func @f() { return }"))

"""A linalg program that reads its weights from an archive (`ansor-opt MODEL --ansor-rewrite --params-out`) is
tuned with them: its whole-program checks load the archive, its output and notes name it, and without it the
tune stops with one line saying what to give."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ansor_mlir import cli

REPO = Path(__file__).resolve().parents[2]
MODEL = f"{REPO}/examples/models/tiny.py:tiny_cnn"


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    """The rewritten tiny CNN as linalg, its weights in w.irpa (named in the program's first line)."""
    where = tmp_path_factory.mktemp("weights")
    assert cli.main([MODEL, "--ansor-rewrite", "--params-out", str(where / "w.irpa"), "-o", str(where / "p.mlir")]) == 0
    return where / "p.mlir"


def test_the_archive_comes_from_the_first_line_or_beside_the_program(program: Path, tmp_path: Path):
    text = program.read_text()
    args = cli.build_parser().parse_args([str(program)])
    named = cli.read_input(args, [])
    assert named.weights == program.parent / "w.irpa" and named.parameters == named.weights.read_bytes()
    # No first-line comment: NAME.irpa beside the program.
    bare = tmp_path / "bare.mlir"
    bare.write_text(text.split("\n", 1)[1])
    shutil.copy(program.parent / "w.irpa", tmp_path / "bare.irpa")
    beside = cli.read_input(cli.build_parser().parse_args([str(bare)]), [])
    assert beside.weights == tmp_path / "bare.irpa" and beside.parameters
    (tmp_path / "bare.irpa").unlink()
    assert cli.read_input(cli.build_parser().parse_args([str(bare)]), []).parameters == b""


def test_tuning_without_the_archive_says_what_to_give(program: Path, tmp_path: Path, capsys):
    bare = tmp_path / "bare.mlir"
    bare.write_text(program.read_text().split("\n", 1)[1])
    code = cli.main([str(bare), f"--ansor-tune=trials=4 log={tmp_path / 'l.jsonl'} progress=0", "-o",
                     str(tmp_path / "t.mlir")])
    err = capsys.readouterr().err
    assert code == 1 and "reads its weights from a parameter archive that was not given" in err
    assert "Traceback" not in err


def log_with_a_faster_candidate(program: Path, log: Path) -> None:
    """A tune's log in which one measured candidate is recorded at half its task's default time, so the next
    tune's verification has a candidate to check in the whole program (which of the tiny CNN's microsecond tasks
    a 16-trial search finds faster than IREE's default depends on the host: on an AVX-512 Xeon none)."""
    assert cli.main([str(program), f"--ansor-tune=trials=16 verify=0 log={log} progress=0", "-o",
                     str(log.with_suffix(".mlir"))]) == 0
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    default = {r["task"]: r["result"]["median_s"] for r in records
               if "result" in r and r["sketch"].get("index") == 0 and r["result"]["error"] == "none"}
    tuned = next(r for r in records if "result" in r and r["sketch"].get("index", 0) != 0
                 and r["result"]["error"] == "none" and r["task"] in default)
    tuned["result"]["median_s"] = default[tuned["task"]] / 2
    log.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_the_whole_program_checks_run_with_the_weights(program: Path, tmp_path: Path, capsys):
    log, out = tmp_path / "l.jsonl", tmp_path / "t.mlir"
    log_with_a_faster_candidate(program, log)
    assert cli.main([str(program), f"--ansor-tune=trials=16 verify=1 log={log} progress=0", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    checks = [r["program"] for r in map(json.loads, log.read_text().splitlines()) if "program" in r]
    assert checks, "no whole-program check ran"
    assert all(c["default_s"] > 0 and "io_parameters" not in c["reason"] for c in checks), checks
    # The tuned output and the printed run command name the archive.
    assert out.read_text().startswith(f"// The weights are in {program.parent / 'w.irpa'}")
    assert f"--parameters=model={program.parent / 'w.irpa'}" in err

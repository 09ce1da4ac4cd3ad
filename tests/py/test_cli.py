"""Bad input gets one clear line naming the input and the fix, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import matmul_bias_relu


def ansor_opt(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ansor_mlir.cli", *args], input=stdin, capture_output=True, text=True, timeout=300
    )


@pytest.fixture()
def module(tmp_path):
    path = tmp_path / "mm.mlir"
    path.write_text(matmul_bias_relu(32, 32, 32))
    return path


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["--ansor-extract-tasks"], "func.func @f( {", r"<stdin>: not valid MLIR: line 1:14"),
        (["missing.mlir", "--ansor-extract-tasks"], None, r"missing\.mlir: no such file"),
        (["--ansor-tune=tirals=3"], "", r"pass 'ansor-tune': unknown option 'tirals' \(accepted: target"),
        (["--ansor-tune=trials=many"], "", r"option trials=many is not an integer"),
        (["--ansor-apply-best"], "", r"missing required option log="),
        (["--ansor-extract-tasks=target=tpu"], "", r"unknown target 'tpu'"),
        (["--pass-pipeline=builtin.module(ansor-frobnicate)"], "", r"unknown pass 'ansor-frobnicate'"),
        ([], "", r"no pass given"),
        (["--ansor-extract-tasks"],
         "func.func @f(%a: tensor<?xf32>) -> tensor<?xf32> { return %a : tensor<?xf32> }",
         r"dynamic shapes"),
    ],
)
def test_user_errors_are_one_line(args, stdin, message):
    import re

    done = ansor_opt(*args, stdin=stdin)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ansor-opt: error: ")
    assert re.search(message, lines[0]), lines[0]


def test_unreadable_and_corrupt_logs(module, tmp_path):
    missing = ansor_opt(str(module), f"--ansor-apply-best=log={tmp_path / 'none.jsonl'}")
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    corrupt = tmp_path / "bad.jsonl"
    corrupt.write_text("not json\n")
    done = ansor_opt(str(module), f"--ansor-apply-best=log={corrupt}")
    assert done.returncode == 0, done.stderr
    assert "bad.jsonl:1: skipping corrupt record" in done.stderr
    assert corrupt.read_text() == "not json\n"


def test_nothing_to_tune_is_explained(tmp_path):
    text = "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> { return %a : tensor<4xf32> }"
    done = ansor_opt(f"--ansor-tune=log={tmp_path / 'l.jsonl'}", stdin=text)
    assert done.returncode == 1 and "nothing to tune" in done.stderr

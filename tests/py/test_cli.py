"""`ansor-opt` as a process: one clear line per user error (never a traceback), mlir-opt's exit statuses."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import matmul_bias_relu

from ansor_mlir.database.records import FORMAT_VERSION, read_records


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
        (["--ansor-tune=trials=many"], "", r"invalid trials=many: expected an integer in \[0, 1000000\]"),
        (["--ansor-apply-best"], "", r"missing required option log="),
        (["--ansor-extract-tasks=target=tpu"], "", r"invalid target=tpu: valid choices are llvm-cpu"),
        (["--ansor-print-strategy=seed=0 rule=nosuchrule"], "", r"invalid rule=nosuchrule: valid choices are "),
        (["--pass-pipeline=builtin.module(ansor-frobnicate)"], "", r"unknown pass 'ansor-frobnicate'"),
        (["--ansor-extract-tasks"],
         "func.func @f(%a: tensor<?xf32>) -> tensor<?xf32> { return %a : tensor<?xf32> }",
         r"ansor-extract-tasks: <stdin>:1: function f has dynamic shapes"),
        (["--ansor-emit-tuning-spec=log=none.jsonl", "--ansor-extract-tasks"], "",
         r"ansor-emit-tuning-spec: <stdin>: no func.func to tune"),
        (["--bogus"], "", r"unrecognized arguments: --bogus"),
    ],
)
def test_user_errors_are_one_line(args, stdin, message):
    done = ansor_opt(*args, stdin=stdin)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ansor-opt: error: "), done.stderr
    assert re.search(message, lines[0]), lines[0]
    assert done.stdout == ""


def test_unreadable_and_corrupt_logs(module, tmp_path):
    missing = ansor_opt(str(module), f"--ansor-apply-best=log={tmp_path / 'none.jsonl'}")
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    corrupt = tmp_path / "bad.jsonl"
    corrupt.write_text("not json\n")
    done = ansor_opt(str(module), f"--ansor-apply-best=log={corrupt}")
    assert done.returncode == 0, done.stderr
    assert "ansor-opt: warning: " in done.stderr and "bad.jsonl:1: skipping corrupt record" in done.stderr
    assert corrupt.read_text() == "not json\n"


def test_nothing_to_tune_is_explained(tmp_path):
    text = "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> { return %a : tensor<4xf32> }"
    done = ansor_opt(f"--ansor-tune=log={tmp_path / 'l.jsonl'}", stdin=text)
    assert done.returncode == 1 and "ansor-tune: <stdin>:1:" in done.stderr and "nothing to tune" in done.stderr


def test_no_pass_parses_and_prints_the_same_text():
    text = "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> { return %a : tensor<4xf32> }"
    once = ansor_opt(stdin=text)
    assert once.returncode == 0, once.stderr
    assert once.stdout.startswith("module {\n  func.func @f(")
    assert ansor_opt(stdin=once.stdout).stdout == once.stdout


def test_split_input_file_processes_every_chunk_and_fails_if_one_does():
    good = "func.func @f() { return }"
    done = ansor_opt("--split-input-file", stdin=f"{good}\n// -----\nfunc.func @g( {{\n// -----\n{good}\n")
    assert done.returncode == 1
    assert done.stderr.strip() == "ansor-opt: error: <stdin>: not valid MLIR: line 3:14: expected non-function type"
    assert done.stdout.count("func.func @f()") == 2 and done.stdout.count("// -----\n") == 1


def test_verify_diagnostics_status(tmp_path):
    bad = "// expected-error @+1 {{expected non-function type}}\nfunc.func @g( {\n"
    assert ansor_opt("--verify-diagnostics", stdin=bad).returncode == 0
    wrong = bad.replace("non-function", "function")
    done = ansor_opt("--verify-diagnostics", stdin=wrong)
    assert done.returncode == 1
    assert '<stdin>:1: error: expected error "expected function type" at line 2 was not produced' in done.stderr
    assert "<stdin>:2: error: unexpected error: <stdin>: not valid MLIR: line 2:14" in done.stderr


def test_version_names_the_record_schema():
    done = ansor_opt("--version")
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[0].startswith("ansor-mlir ") and lines[1].startswith("IREE 3.13")
    assert lines[2].startswith(f"tuning record schema {FORMAT_VERSION} (cost-model features ")


# ---- every tool: the same conventions ----------------------------------------------------------------------


def console_script(name: str) -> str:
    """An installed console script (beside this Python, or on PATH)."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return shutil.which(name, path=path) or pytest.skip(f"the {name} console script is not installed")


def run_tool(name: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([console_script(name), *args], capture_output=True, text=True, timeout=600, cwd=cwd)


def test_every_tool_has_the_same_version():
    tools = ("ansor-opt", "ansor-compile", "ansor-measure", "ansor-log")
    outputs = {name: run_tool(name, "--version") for name in tools}
    assert all(done.returncode == 0 for done in outputs.values()), {n: d.stderr for n, d in outputs.items()}
    assert len({done.stdout for done in outputs.values()}) == 1
    assert outputs["ansor-log"].stdout.startswith("ansor-mlir ")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("func.func @f(%a: f32, %b: f32) -> f32 {\n  %c = arith.addf %a, %b : f32\n  return %c : f32\n}",
         "function f computes on scalars only: IREE forms no dispatch of it"),
        ("func.func private @f(%a: tensor<4xf32>) -> tensor<4xf32>", "function f is a declaration (no body)"),
        ("func.func @f(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>) {\n"
         "  linalg.matmul ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)\n  return\n}",
         "function f works on memrefs: ansor-mlir tunes programs on tensors"),
    ],
)
def test_nothing_to_tune_is_said_in_one_line(text, why):
    """Inputs with nothing to tune used to print an empty module and exit 0."""
    done = ansor_opt("--ansor-extract-tasks", stdin=text)
    assert done.returncode == 1 and done.stdout == "", done.stderr
    assert done.stderr.startswith("ansor-opt: error: ansor-extract-tasks: <stdin>:1: nothing to tune: " + why)
    assert done.stderr.count("\n") == 1


def test_ansor_opt_help_states_the_common_options_once():
    text = ansor_opt("--help").stdout
    assert text.count("target=<llvm-cpu|ARCH:CPU>") == 1 and text.count("threads=<1..1024>") == 1
    assert len(text.splitlines()) < 110


def test_ansor_opt_logs_to_its_outputs_name_and_says_how_to_build_it(tmp_path, module):
    done = ansor_opt(str(module), "--ansor-tune=trials=1 verify=0 progress=0", "-o", str(tmp_path / "tuned.mlir"))
    assert done.returncode == 0, done.stderr
    assert len(read_records(tmp_path / "tuned.jsonl")) == 1
    assert f"ansor-opt: note: build it: iree-compile {tmp_path / 'tuned.mlir'} " in done.stderr
    assert f"ansor-opt: note: run it: iree-run-module --module={tmp_path / 'tuned.vmfb'} --device=local-sync " \
           "--function=mm --input=32x32xf32=0 --input=32x32xf32=0 --input=32xf32=0" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threads", "0"], "argument --threads: invalid value '0': out of range: expected an integer in [1, 1024]"),
        (["--time-budget", "soon"], "argument --time-budget: invalid value 'soon': expected a duration"),
        (["--batch-size", "x"], "argument --batch-size: invalid value 'x': expected an integer in [1, 4096]"),
        ([], "-o OUTPUT.vmfb is required (or --list-tasks)"),
    ],
)
def test_ansor_compile_errors_are_one_line(module, args, message):
    done = run_tool("ansor-compile", str(module), *args)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"ansor-compile: error: {message}")


def test_ansor_compile_lists_the_tasks(module):
    table = run_tool("ansor-compile", str(module), "--list-tasks")
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()
    assert header.split() == ["task", "op", "shape", "FLOPs", "weight"]
    assert row.split() == ["mm_dispatch_0", "linalg.matmul", "32x32x32", "(ppr)", "67,584", "1"]
    (task,) = json.loads(run_tool("ansor-compile", str(module), "--list-tasks", "--format", "json").stdout)
    assert task == {"name": "mm_dispatch_0", "op": "linalg.matmul", "shape": "32x32x32", "iterators": "ppr",
                    "flops": 67584, "weight": 1, "tunable": True}

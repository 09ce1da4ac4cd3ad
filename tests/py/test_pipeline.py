"""The pipeline behind `ansor-opt` and `api.run_pipeline`: options, pipelines, chunks, expectations, module objects."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import matmul_bias_relu
from iree.compiler import ir

from ansor_mlir import api
from ansor_mlir.dialect import ansor_ir
from ansor_mlir.errors import AnsorError
from ansor_mlir.passes.diagnostics import Diagnostic, expectations, verify
from ansor_mlir.passes.pass_options import as_invocations, parse_options, parse_pipeline, passes_help
from ansor_mlir.passes.pipeline import PassError
from ansor_mlir.passes.source import new_context, read_module, split_input

# ---- options and pipelines (no IREE) ---------------------------------------------------------------------------


def test_options_are_typed_with_defaults():
    tune = parse_options("ansor-tune", "trials=8, log='a b.jsonl' seed=3")
    assert tune["trials"] == 8 and tune["seed"] == 3 and tune["log"] == Path("a b.jsonl")
    assert tune["batch-size"] == 8 and tune["policy"] == "evolutionary" and tune["model"] == "shipped"
    assert parse_options("ansor-print-strategy", "")["rule"] is None


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("ansor-tune", "trials=1000001", "invalid trials=1000001: out of range: expected an integer in [0, 1000000]"),
        ("ansor-tune", "threads=x", "invalid threads=x: expected an integer in [1, 1024]"),
        ("ansor-tune", "policy=greedy", "invalid policy=greedy: valid choices are evolutionary, random"),
        ("ansor-tune", "model=none.json", "no such file; valid choices are shipped"),
        ("ansor-print-strategy", "rule=nosuchrule", "valid choices are iree-default, multi-level-tiling"),
        ("ansor-extract-tasks", "cpu=pentium9", "valid choices are host, "),
        ("ansor-extract-tasks", "trials=1", "unknown option 'trials' (accepted: target, cpu, threads, rewrites)"),
        ("ansor-apply-best", "", "missing required option log=..."),
        ("ansor-tune", "seed", "option 'seed' must be key=value"),
    ],
)
def test_bad_options_name_what_is_accepted(name, options, message):
    with pytest.raises(AnsorError) as error:
        parse_options(name, options)
    assert message in str(error.value)


def test_pipeline_string_and_list_are_the_same_invocations():
    text = "builtin.module(ansor-extract-tasks, ansor-tune{trials=2 log=\"x, y.jsonl\"}, ansor-generate-sketches)"
    invocations = parse_pipeline(text)
    assert [i.name for i in invocations] == ["ansor-extract-tasks", "ansor-tune", "ansor-generate-sketches"]
    assert invocations[1]["log"] == Path("x, y.jsonl") and invocations[1]["trials"] == 2
    listed = as_invocations(["ansor-extract-tasks", 'ansor-tune{trials=2 log="x, y.jsonl"}', invocations[2]])
    assert listed == invocations


@pytest.mark.parametrize("text", ["ansor-tune", "builtin.module()", "builtin.module(ansor-tune{trials=1)",
                                  "builtin.module(ansor-tune})"])
def test_malformed_pipelines_are_refused(text):
    with pytest.raises(AnsorError, match="--pass-pipeline"):
        parse_pipeline(text)


def test_help_lists_every_option_with_default_and_values():
    text = passes_help()
    assert "--ansor-tune:" in text and "progress=<0|1>" in text and "(default: 64 per task of the program" in text
    assert "log=<FILE>" in text and "(required)" in text


# ---- chunks and expectations -----------------------------------------------------------------------------------


def test_chunks_keep_their_file_lines():
    chunks = split_input("a\n// -----\nb\nc\n// -----\n")
    assert [c.first_line for c in chunks] == [1, 3, 6]
    assert chunks[1].text.splitlines() == ["", "", "b", "c"]


def test_expectations_and_their_lines():
    text = "\n".join([
        "x  // expected-error {{same line}}",
        "// expected-warning @below {{below}}",
        "// expected-error @below {{also below}}",
        "y",
        "// expected-error @above {{above}}",
        "// expected-error @+2 {{two down}}",
        "// expected-error-re @unknown {{no {{[a-z]+}} line}}",
    ])
    found = {(e.severity, e.pattern): e.line for e in expectations(text)}
    assert found == {("error", "same line"): 1, ("warning", "below"): 4, ("error", "also below"): 4,
                     ("error", "above"): 4, ("error", "two down"): 8, ("error", "no {{[a-z]+}} line"): None}


def test_verify_reports_unexpected_and_unmet():
    expected = expectations("// expected-error @+1 {{bad}}\nx\n// expected-error-re @unknown {{line {{[0-9]+}}}}")
    diagnostics = [Diagnostic("error", "so bad", 2), Diagnostic("error", "line 12"), Diagnostic("warning", "hm", 2)]
    assert verify(diagnostics, expected, "f.mlir") == ["f.mlir:2: error: unexpected warning: hm"]
    assert verify([], expected, "f.mlir") == [
        'f.mlir:1: error: expected error "bad" at line 2 was not produced',
        'f.mlir:3: error: expected error "line {{[0-9]+}}" at unknown location was not produced',
    ]


def test_ansor_ir_is_checked_against_irdl():
    text = '%0 = "ansor.choice"() {name = "x"} : () -> !transform.any_param\n'
    with pytest.raises(AnsorError) as error:
        read_module(text, "in.mlir", new_context())
    assert str(error.value) == (
        "in.mlir: line 1: not valid ansor IR: 'ansor.choice' op attribute \"options\" is expected but not provided"
    )


# ---- running passes on module objects (real IREE) --------------------------------------------------------------


@pytest.fixture(scope="module")
def mm() -> str:
    return matmul_bias_relu(32, 32, 32, name="mm")


def test_run_pipeline_returns_module_objects(mm):
    result = api.run_pipeline(mm, ["ansor-extract-tasks", "ansor-generate-sketches"], name="mm.mlir")
    (first, tasks), (second, sketched) = result.after
    assert (first.name, second.name) == ("ansor-extract-tasks", "ansor-generate-sketches")
    assert isinstance(tasks, ir.Module) and sketched is result.module
    assert tasks.context is sketched.context
    (task,) = ansor_ir.task_ops(tasks)
    assert ansor_ir.attributes(task)["name"] == "mm_dispatch_0"
    assert not [op for op in ansor_ir.walk(tasks.body) if op.name == ansor_ir.SKETCH]
    assert len([op for op in ansor_ir.walk(sketched.body) if op.name == ansor_ir.SKETCH]) > 1
    again = api.run_pipeline(mm, "builtin.module(ansor-extract-tasks, ansor-generate-sketches)", name="mm.mlir")
    assert str(again.module) == str(result.module)


def test_run_pipeline_on_a_module_of_the_callers_context(mm):
    context = ir.Context()
    module = ir.Module.parse(mm, context)
    seen = []
    result = api.run_pipeline(module, "builtin.module(ansor-extract-tasks)",
                              after_pass=lambda n, invocation, out: seen.append((n, invocation.name, out)))
    assert result.module.context is context
    assert [(n, name) for n, name, _ in seen] == [(1, "ansor-extract-tasks")]
    assert seen[0][2] is result.module


def test_a_failing_pass_names_itself_and_its_input(mm, tmp_path):
    spec_then_extract = ["ansor-emit-tuning-spec{log=missing.jsonl}", "ansor-extract-tasks"]
    with pytest.raises(PassError) as error:
        api.run_pipeline(mm, spec_then_extract, name="mm.mlir")
    assert str(error.value).startswith("ansor-emit-tuning-spec: mm.mlir:2: tuning log missing.jsonl does not exist")
    assert error.value.line == 2
    # A copy: each corrupt line is reported once per process, and other tests read the original.
    log = tmp_path / "mm64_log.jsonl"
    shutil.copy(Path(__file__).parents[1] / "lit" / "Inputs" / "mm64_log.jsonl", log)
    with pytest.warns(UserWarning, match="skipping corrupt record"), \
            pytest.raises(PassError, match=r"^ansor-generate-sketches: output of pass 1 \(ansor-emit-tuning-spec\): "):
        api.run_pipeline(mm, [f"ansor-emit-tuning-spec{{log={log}}}", "ansor-generate-sketches"], name="mm.mlir")

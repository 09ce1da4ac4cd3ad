"""Options declared once (`tuning.options`): every surface derives its names, defaults and checks from the table."""

from __future__ import annotations

import dataclasses
import inspect
import time
from concurrent.futures import Future
from pathlib import Path

import pytest
from conftest import matmul_bias_relu

from ansor_mlir import api, cli
from ansor_mlir.core.target import Target
from ansor_mlir.database.registry import make_database
from ansor_mlir.errors import AnsorError
from ansor_mlir.measure.builder import BuildInput, BuildResult, ProgramBuildInput
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.measure.local_runner import LocalRunner
from ansor_mlir.passes.pass_options import PASSES, parse_options, passes_help
from ansor_mlir.tuning.budget import Budget
from ansor_mlir.tuning.options import (
    COMMON,
    TUNE_CLI_OPTIONS,
    TUNE_OPTIONS,
    BadValue,
    TuneOptions,
    duration,
)
from ansor_mlir.tuning.tuner import Tuner

MM = "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> { return %a : tensor<4xf32> }"


def test_every_surface_takes_the_tables_options_with_its_defaults():
    defaults = TuneOptions()
    tune_pass = PASSES["ansor-tune"]
    assert [o.name for o in tune_pass.options] == [o.name for o in (*COMMON, *TUNE_CLI_OPTIONS)]
    compile_flags = {action.dest: action for action in cli.build_compile_parser()._actions}
    signature = inspect.signature(api.tune).parameters
    for option in TUNE_OPTIONS:
        assert getattr(defaults, option.keyword) == option.default, option.name
        assert signature[option.keyword].default == option.default, option.name
        assert signature[option.keyword].kind is inspect.Parameter.KEYWORD_ONLY
        if option.cli:
            assert tune_pass.option(option.name) is option
            flag = f"--{option.switch or option.name}"
            assert flag in compile_flags[option.keyword].option_strings, option.name
    for name in ("cpu", "threads", "rewrites"):
        assert name in signature and name in inspect.signature(api.compile).parameters
        assert name in inspect.signature(api.emit_tuning_spec).parameters


def test_a_pass_invocation_is_the_same_options_as_the_keywords():
    invocation = parse_options("ansor-tune", "trials=8 batch-size=4 time-budget=2m model=none progress=0")
    assert TuneOptions.from_values(dict(invocation.options)) == TuneOptions(trials=8, batch_size=4, time_budget=120.0,
                                                                            model="none", progress=False)
    assert invocation.given == {"trials", "batch-size", "time-budget", "model", "progress"}


@pytest.mark.parametrize(("text", "seconds"), [("90", 90.0), ("90s", 90.0), ("30m", 1800.0), ("2h", 7200.0),
                                               ("1h30m", 5400.0), ("1.5m", 90.0), ("1800.0", 1800.0)])
def test_durations(text, seconds):
    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "-5", "5x", "1h-3m", "0", "inf"])
def test_bad_durations(text):
    with pytest.raises(BadValue, match="expected a duration"):
        duration(text)


def test_an_options_object_beside_one_of_its_keywords_is_an_error():
    """The options object used to win silently over `trials=64`."""
    with pytest.raises(AnsorError, match=r"tune: options= and trials= both given: give every option as a keyword"):
        api.tune(MM, trials=64, options=TuneOptions(verify=0))


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"tirals": 3}, r"tune: unknown keyword argument 'tirals' \(accepted: module, target, name, callbacks"),
        ({"batch_size": 0}, r"tune: invalid batch_size=0: out of range: expected an integer in \[1, 4096\]"),
        ({"time_budget": "soon"}, r"tune: invalid time_budget='soon': expected a duration"),
        ({"progress": 1}, r"tune: invalid progress=1: expected True or False"),
        ({"threads": 0}, r"tune: invalid threads=0: out of range: expected an integer in \[1, 1024\]"),
        ({"model": "missing.json"}, r"tune: invalid model='missing.json': no such file; valid choices are shipped"),
        ({"options": TuneOptions(seed=-1)}, r"tune: invalid options.seed=-1: out of range"),
        ({"builder": "remote"}, r"tune: invalid builder='remote': valid choices are local"),
        ({"runner": 3}, r"tune: invalid runner=3: valid choices are local"),
    ],
)
def test_keywords_are_checked_by_their_options_before_anything_runs(tmp_path, keywords, message):
    log = tmp_path / "l.jsonl"
    with pytest.raises(AnsorError, match=message):
        api.tune(MM, **({"log": log} if "options" not in keywords else {}), **keywords)
    assert not log.exists()


def test_help_states_the_common_options_once():
    text = passes_help()
    for option in COMMON:
        assert text.count(f"  {option.name}=<") == 1, option.name
    assert text.count("log=<FILE>") == 4 and len(text.splitlines()) < 60


def test_every_tool_names_its_log_after_its_output():
    assert cli.default_log("tuned.vmfb") == Path("tuned.jsonl")
    assert cli.default_log("out/tuned.mlir") == Path("out/tuned.jsonl")
    assert cli.default_log("-") == Path("ansor_tuning.jsonl")
    args = cli.build_parser().parse_args(["in.mlir", "--ansor-tune=trials=2", "--ansor-apply-best=log=x.jsonl",
                                          "-o", "tuned.mlir"])
    tune, apply = cli.invocations_of(args)
    assert tune["log"] == Path("tuned.jsonl") and apply["log"] == Path("x.jsonl")
    named = cli.build_parser().parse_args(["in.mlir", "--ansor-tune=log=mine.jsonl", "-o", "tuned.mlir"])
    assert cli.invocations_of(named)[0]["log"] == Path("mine.jsonl")


def test_a_time_budget_expires():
    assert not Budget.for_run(1, 10, None, 0).expired()
    budget = Budget.for_run(2, 10, None, 0, time_s=0.01)
    time.sleep(0.02)
    assert budget.expired() and dataclasses.replace(budget, deadline=None).remaining([0, 0]) == 10


class CountingBuilder(LocalBuilder):
    """This host's builder, counting what it is given: proof that the tune used the instance passed."""

    def __init__(self, target: Target):
        super().__init__(target, workers=1)
        self.submitted = 0

    def submit(self, item: BuildInput | ProgramBuildInput) -> Future[BuildResult]:
        self.submitted += 1
        return super().submit(item)


def test_the_builder_and_runner_are_chosen_by_instance_or_name(tmp_path, target):
    builder = CountingBuilder(target)
    runner = LocalRunner(target, min_time_s=0.01)
    options = TuneOptions(trials=3, verify=0, log=tmp_path / "l.jsonl", builder=builder, runner=runner,
                          progress=False)
    tuner = Tuner(target, options)
    assert tuner.builder is builder and tuner.runner is runner
    tuner.tune_module(matmul_bias_relu(32, 32, 32), "mm")
    assert builder.submitted >= 3
    named = Tuner(target, TuneOptions(builder="local", runner="local", log=tmp_path / "n.jsonl"))
    assert isinstance(named.builder, LocalBuilder) and isinstance(named.runner, LocalRunner)


def test_a_tuner_keeps_its_records_in_the_database_given(tmp_path, target):
    log = tmp_path / "never.jsonl"
    database = make_database("memory")
    Tuner(target, TuneOptions(trials=2, verify=0, log=log, progress=False),
          database=database).tune_module(matmul_bias_relu(32, 32, 32), "mm")
    assert len(database.records()) >= 2 and not log.exists()

"""The Python API: one set of names at the top of the package, documented parameter by parameter."""

from __future__ import annotations

import inspect
import pydoc
import subprocess
import sys

import pytest
from conftest import matmul_bias_relu

import ansor_mlir
from ansor_mlir import api
from ansor_mlir.core.target import detect_host
from ansor_mlir.errors import AnsorError
from ansor_mlir.tuning.callbacks import TuningCallback

FUNCTIONS = ("tune", "compile", "load_model", "apply_best", "emit_tuning_spec", "extract_tasks")
TYPES = ("TuneResult", "CompiledModel", "Task", "TuneOptions", "ModelSource")


def test_the_package_lists_its_api_and_imports_it_on_first_use():
    code = ("import sys, ansor_mlir; print(ansor_mlir.__all__); print('ansor_mlir.api' in sys.modules); "
            "print(sorted(set(ansor_mlir.__all__) - set(dir(ansor_mlir)))); ansor_mlir.tune; "
            "print('ansor_mlir.api' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    listed, before, missing, after = done.stdout.splitlines()
    assert set(eval(listed)) >= {*FUNCTIONS, *TYPES}
    assert (before, missing, after) == ("False", "[]", "True")


@pytest.mark.parametrize("name", FUNCTIONS)
def test_help_documents_every_parameter_and_the_return_value(name):
    function = getattr(ansor_mlir, name)
    assert function is getattr(api, name)
    text = pydoc.render_doc(function, renderer=pydoc.plaintext)
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind is not inspect.Parameter.VAR_KEYWORD:
            assert f"    {parameter.name} : " in text, f"{name}: {parameter.name} is not documented"
    assert "Returns\n    -------" in text


def test_threads_and_cpu_are_keywords_of_a_target_name_or_object():
    assert api.resolve_target("llvm-cpu", threads=2).threads == 2
    host = api.resolve_target()
    assert api.resolve_target(host, threads=3).threads == 3 and api.resolve_target(host).threads == host.threads
    with pytest.raises(AnsorError, match=r"resolve_target: invalid cpu='znver3': the Target given names its CPU"):
        api.resolve_target(detect_host(), cpu="znver3")


class Notes(TuningCallback):
    def __init__(self) -> None:
        self.notes: list[str] = []

    def on_note(self, message):
        self.notes.append(message)

    def on_start(self, results, trials):
        pass

    def on_measured(self, results, index, records):
        pass

    def on_round(self, results, index, left):
        pass

    def on_task_done(self, result):
        pass

    def on_end(self, results):
        pass


def test_a_time_budget_stops_the_search_before_its_trials(tmp_path, target):
    notes = Notes()
    result = api.tune(matmul_bias_relu(32, 32, 32), target, trials=1000, time_budget="1s", verify=0,
                      progress=False, log=tmp_path / "l.jsonl", callbacks=[notes])
    assert any(note.startswith("time budget of 1 s spent: the search stops with ") for note in notes.notes), notes
    assert sum(r.trials for r in result.tasks) < 1000 and "flow.executable" in result.module

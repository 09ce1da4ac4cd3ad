"""PyTorch models through torch.export and IREE's FX importer: the bundled tiny models, both entry points.

torch is optional (pip install torch==2.13.0, the ~750 MB CPU build): without it these tests skip and CI
exercises the ONNX path (test_model_import.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import ansor_mlir
from ansor_mlir import api
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.torch_import import load_factory

MODELS = Path(__file__).parents[2] / "examples" / "models"
RTOL, ATOL = 1e-5, 1e-6


def eager(module, inputs) -> np.ndarray:
    with torch.no_grad():
        return module(*inputs).numpy()


def test_a_module_with_example_inputs_compiles_to_its_eager_outputs(target):
    module, inputs = load_factory(f"{MODELS / 'tiny.py'}:tiny_mlp")
    source = ansor_mlir.load_model(module, inputs)
    assert ansor_mlir.load_model((module, inputs)).text == source.text
    assert "#flow.parameter.named" in source.text and "dense_resource" not in source.text
    program = api.compile(source, target)
    np.testing.assert_allclose(program(inputs[0].numpy()), eager(module, inputs), rtol=RTOL, atol=ATOL)


def test_batch_norm_runs_in_eval_mode_and_the_module_keeps_its_mode(target):
    module, inputs = load_factory(f"{MODELS / 'tiny.py'}:tiny_cnn")
    module.bn1.running_mean.uniform_(-0.5, 0.5)
    module.train()
    program = ansor_mlir.compile(module, target, example_inputs=inputs)
    assert module.training
    np.testing.assert_allclose(program(inputs[0]), eager(module.eval(), inputs), rtol=RTOL, atol=ATOL)


def test_the_same_module_exported_to_onnx_gives_the_same_outputs(tmp_path, target):
    sys.path.insert(0, str(Path(__file__).parents[2] / "tools"))
    from export_onnx import export_onnx

    reference = f"{MODELS / 'tiny.py'}:tiny_cnn"
    module, inputs = load_factory(reference)
    path = export_onnx(reference, tmp_path / "tiny_cnn.onnx")
    via_torch, via_onnx = ansor_mlir.compile(reference, target), ansor_mlir.compile(path, target)
    expected = eager(module, inputs)
    for program in (via_torch, via_onnx):
        np.testing.assert_allclose(program(inputs[0]), expected, rtol=RTOL, atol=ATOL)


def test_ansor_opt_takes_file_py_factory(tmp_path):
    weights = tmp_path / "w.irpa"
    done = subprocess.run([sys.executable, "-m", "ansor_mlir.cli", f"{MODELS / 'tiny.py'}:tiny_mlp",
                           "--ansor-extract-tasks", "--params-out", str(weights)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.count("ansor.task") >= 1, done.stderr
    assert weights.stat().st_size > 64 * 128 * 4


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("", r"m\.py defines no function make: name a function returning \(module, example_inputs\)"),
        ("def make():\n    return 3\n", r"make\(\) must return \(torch\.nn\.Module, example_inputs\), got int"),
        ("def make():\n    raise ValueError('no weights here')\n", r"make\(\) failed: ValueError: no weights here"),
        ("import nonexistent_package\n", r"running .*m\.py failed: ModuleNotFoundError"),
        ("import torch\ndef make():\n    return torch.nn.Linear(2, 2), ('text',)\n",
         r"example input of type str: give tensors or numpy arrays"),
    ],
)
def test_bad_factories_are_one_clear_error(tmp_path, body, message):
    path = tmp_path / "m.py"
    path.write_text(body)
    with pytest.raises(AnsorError, match=message):
        ansor_mlir.load_model(f"{path}:make")

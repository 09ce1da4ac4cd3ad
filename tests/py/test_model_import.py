"""Models in, tuned IREE programs out: ONNX through IREE's importer, weights kept out of the tuner's IR.

Real IREE compiles and runs everything; references come from onnxruntime.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx_models import cnn_onnx, mlp_onnx, onnxruntime_outputs, opset17_model, single_node_onnx

import ansor_mlir
from ansor_mlir import api
from ansor_mlir.cli import compile_main
from ansor_mlir.errors import AnsorError
from ansor_mlir.mlir.iree_compiler import tuning_spec_flags
from ansor_mlir.mlir.iree_module import CompiledModel

RTOL, ATOL = 1e-5, 1e-6


def ansor_opt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ansor_mlir.cli", *args], capture_output=True, text=True,
                          timeout=600)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture()
def x() -> np.ndarray:
    return np.random.default_rng(1).standard_normal((4, 32)).astype(np.float32)


def test_weights_stay_out_of_the_text_and_come_back(target):
    model = mlp_onnx(features=256, hidden=256)
    weight_bytes = sum(np.prod(w.dims) * 4 for w in model.graph.initializer)
    source = ansor_mlir.load_model(model)
    assert weight_bytes > 256 * 1024
    assert len(source.text) < 20_000 and "dense_resource" not in source.text and "0x" not in source.text
    assert source.text.count("#flow.parameter.named") == 4 and source.entry == "mlp"
    assert len(source.parameters) >= weight_bytes
    x = np.random.default_rng(1).standard_normal((4, 256)).astype(np.float32)
    (expected,) = onnxruntime_outputs(model, x)
    for embed in (True, False):
        program = api.compile(source, target, embed_parameters=embed)
        assert (len(program.vmfb) > weight_bytes) == embed
        np.testing.assert_allclose(program(x), expected, rtol=RTOL, atol=ATOL)


def test_conv_model_compiles_to_onnxruntime_outputs(target):
    model = cnn_onnx()
    x = np.random.default_rng(2).standard_normal((1, 3, 12, 12)).astype(np.float32)
    (expected,) = onnxruntime_outputs(model, x)
    np.testing.assert_allclose(ansor_mlir.compile(model, target)(x), expected, rtol=RTOL, atol=ATOL)


def test_a_path_and_a_model_proto_are_the_same_model(tmp_path, target):
    model = mlp_onnx()
    path = tmp_path / "mlp.onnx"
    onnx.save(model, path)
    from_path, from_proto = api.extract_tasks(path, target), api.extract_tasks(model, target)
    assert [t.key for t in from_path] == [t.key for t in from_proto] and from_path
    assert api.read_source(str(path))[0] == ansor_mlir.load_model(model).text


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: single_node_onnx("Relu", {"x": ["batch", 3]}, ["batch", 3]),
         r"input 'x' has a dynamic dimension 0 \('batch'\): only static shapes can be tuned; export with fixed"),
        (lambda p: onnx.helper.make_model(
            onnx.helper.make_graph([onnx.helper.make_node("FooBar", ["x"], ["y"], name="fb", domain="com.foo")], "g",
                                   [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3])],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])]),
            opset_imports=[onnx.helper.make_opsetid("", 17), onnx.helper.make_opsetid("com.foo", 1)]),
         r"ONNX op FooBar \(node 'fb'\) is not supported by IREE .*'s importer: replace it"),
        (lambda p: p.write_bytes(b"not a model") and p, r"bad\.onnx: not an ONNX model \(DecodeError"),
        (lambda p: p.parent / "missing.onnx", r"missing\.onnx: no such file"),
        (lambda p: 42, r"cannot read a model from a int: give MLIR text"),
    ],
)
def test_bad_models_are_one_clear_error(tmp_path, make, message):
    with pytest.raises(AnsorError, match=message):
        ansor_mlir.load_model(make(tmp_path / "bad.onnx"))


@pytest.mark.parametrize(
    ("write", "arguments", "message"),
    [
        (lambda p: onnx.save(single_node_onnx("Relu", {"x": ["n"]}, ["n"]), p), ["--ansor-extract-tasks"],
         r"^ansor-opt: error: .*m\.onnx: input 'x' has a dynamic dimension"),
        (lambda p: p.write_text("junk"), [], r"^ansor-opt: error: .*m\.onnx: not an ONNX model"),
    ],
)
def test_ansor_opt_model_errors_are_one_line(tmp_path, write, arguments, message):
    path = tmp_path / "m.onnx"
    write(path)
    assert re.search(message, one_error_line(ansor_opt(str(path), *arguments)))


def printed(stderr: str, prefix: str) -> list[str]:
    """The command a tool printed after `prefix` (`ansor-opt: note: build it: `), as words."""
    (line,) = [line for line in stderr.splitlines() if line.startswith(prefix)]
    return shlex.split(line[len(prefix):])


def tool(name: str) -> str:
    """An installed command: on PATH, or beside this Python (the environment's console scripts and IREE's tools)."""
    found = shutil.which(name, path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    return found or pytest.skip(f"{name} is not installed")


def run_printed(words: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run a command as a tool printed it."""
    done = subprocess.run([tool(words[0]), *words[1:]], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_ansor_opt_writes_the_weights_beside_its_output_and_says_how_to_build_and_run_it(tmp_path):
    """The weights go beside `-o`, never beside the input (its directory may be read-only); the output says so in
    a comment, and the build and run commands the console prints work as printed."""
    model = mlp_onnx()
    models, out = tmp_path / "models", tmp_path / "out"
    models.mkdir()
    out.mkdir()
    onnx.save(model, models / "mlp.onnx")
    models.chmod(0o555)
    try:
        tasks = ansor_opt(str(models / "mlp.onnx"), "--ansor-extract-tasks")
        assert tasks.returncode == 0 and "ansor.task" in tasks.stdout, tasks.stderr
        done = subprocess.run([sys.executable, "-m", "ansor_mlir.cli", str(models / "mlp.onnx"), "-o", "mlp.mlir"],
                              cwd=out, capture_output=True, text=True, timeout=600)
    finally:
        models.chmod(0o755)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in models.iterdir()) == ["mlp.onnx"]
    weights = out / "mlp.irpa"
    assert weights.stat().st_size > 0
    assert (out / "mlp.mlir").read_text().startswith("// The weights are in mlp.irpa, not in this program")
    assert "ansor-opt: note: the weights are in mlp.irpa" in done.stderr
    build = printed(done.stderr, "ansor-opt: note: build it: ")
    assert build[:2] == ["iree-compile", "mlp.mlir"] and build[-2:] == ["-o", "mlp.vmfb"]
    run_printed(build, out)
    run = printed(done.stderr, "ansor-opt: note: run it: ")
    assert "--parameters=model=mlp.irpa" in run and "--input=4x32xf32=0" in run
    run_printed([*run, "--output=@y.npy"], out)
    zeros = np.zeros((4, 32), np.float32)
    np.testing.assert_allclose(np.load(out / "y.npy"), onnxruntime_outputs(model, zeros)[0], rtol=RTOL, atol=ATOL)
    again = ansor_opt(str(models / "mlp.onnx"), "-o", str(out / "again.mlir"), "--params-out", str(tmp_path / "w.irpa"))
    assert again.returncode == 0 and (tmp_path / "w.irpa").read_bytes() == weights.read_bytes()


def favour_tuned(log: Path, out: Path) -> int:
    """A copy of a log whose measured non-default candidates are the fastest, so every product has configurations
    to carry (a 2-trial run on a tiny model usually keeps IREE's own); returns how many tasks have one.
    Whole-program verdicts are left out: this checks what the products carry, not which candidate wins."""
    lines, tasks = [], set()
    for line in log.read_text().splitlines():
        record = json.loads(line)
        if record.get("program") is not None:
            continue
        if record["result"]["error"] == "none" and record["sketch"]["index"] != 0:  # sketch 0: IREE's own
            record["result"].update(median_s=1e-12, spread_s=0.0)  # a noisy spread would keep the default
            tasks.add(record["task"])
        lines.append(json.dumps(record))
    out.write_text("\n".join(lines) + "\n")
    return len(tasks)


def test_onnx_to_tuned_vmfb_in_one_command_and_in_iree_flows(tmp_path, target, x, capsys):
    """ansor-compile tunes and builds; a log gives the tuned module, the tuning spec and the library for a model."""
    model = mlp_onnx()
    path, out, log = tmp_path / "mlp.onnx", tmp_path / "mlp.vmfb", tmp_path / "mlp.jsonl"
    onnx.save(model, path)
    assert compile_main([str(path), "-o", str(out), "--trials-per-task", "2"]) == 0
    assert re.search(rf"ansor-compile: wrote {re.escape(str(out))}: function mlp, configurations from .*mlp\.jsonl",
                     capsys.readouterr().err)
    (expected,) = onnxruntime_outputs(model, x)
    np.testing.assert_allclose(CompiledModel(out.read_bytes(), "mlp")(x), expected, rtol=RTOL, atol=ATOL)

    forced = tmp_path / "forced.jsonl"
    configured = favour_tuned(log, forced)
    assert configured >= 1
    tuned = ansor_opt(str(path), f"--ansor-apply-best=log={forced}", "-o", str(tmp_path / "tuned.mlir"))
    assert tuned.returncode == 0, tuned.stderr
    tuned_text = (tmp_path / "tuned.mlir").read_text()
    assert "compilation_info" in tuned_text or "transform_dialect_codegen" in tuned_text
    source = ansor_mlir.load_model(path)
    spec = api.emit_tuning_spec(source, forced, target)
    library = api.emit_transform_library(path, forced, target)
    assert spec.count("@ansor_match_") + library.count("@ansor_match_") >= 2 * configured
    spec_path = tmp_path / "spec.mlir"
    spec_path.write_text(spec)
    weights = source.write_parameters(tmp_path / "w.irpa")
    for text, flags in ((tuned_text, []), (source.text, tuning_spec_flags(spec_path))):
        vmfb = tmp_path / "flow.vmfb"
        build = subprocess.run([shutil.which("iree-compile"), "-", *target.compile_flags(), *flags, "-o", str(vmfb)],
                               input=text, text=True, capture_output=True, timeout=300)
        assert build.returncode == 0, build.stderr[-2000:]
        program = CompiledModel(vmfb.read_bytes(), "mlp", parameters=weights.read_bytes())
        np.testing.assert_allclose(program(x), expected, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(ansor_mlir.compile(source, target, forced)(x), expected, rtol=RTOL, atol=ATOL)

    # ansor-compile's spec route, as it prints it: the program the spec is for, then iree-compile with the spec.
    capsys.readouterr()
    assert compile_main([str(path), "-o", str(tmp_path / "f.vmfb"), "--log", str(forced), "--emit-tuning-spec",
                         str(tmp_path / "f_spec.mlir")]) == 0
    err = capsys.readouterr().err
    assert "@ansor_match_" in (tmp_path / "f_spec.mlir").read_text()
    (line,) = [line for line in err.splitlines() if line.startswith(f"ansor-compile: wrote {tmp_path / 'f_spec.mlir'}")]
    make, build = re.search(r"`(ansor-opt [^`]*)` writes; build that program with it: (.*)$", line).groups()
    run_printed(shlex.split(make), tmp_path)
    run_printed(shlex.split(build), tmp_path)
    program = CompiledModel((tmp_path / "f_spec.vmfb").read_bytes(), "mlp",
                            parameters=(tmp_path / "f_spec.program.irpa").read_bytes())
    np.testing.assert_allclose(program(x), expected, rtol=RTOL, atol=ATOL)


def test_a_threaded_build_says_how_to_call_it_with_its_fences(tmp_path):
    """`ansor-compile --threads 2` builds for IREE's task system, whose function takes a wait and a signal fence:
    the console says so, and its run command and five lines of Python run the program as printed."""
    model = mlp_onnx()
    onnx.save(model, tmp_path / "mlp.onnx")
    done = run_printed(["ansor-compile", "mlp.onnx", "-o", "mlp.vmfb", "--threads", "2"], tmp_path)
    assert "mlp.vmfb is a threaded build (IREE's async-external execution model): mlp takes a wait and a signal " \
           "fence after its inputs" in done.stderr
    run = printed(done.stderr, "ansor-compile: run it: ")
    assert "--device=local-task" in run
    run_printed(run, tmp_path)
    example = [line[4:] for line in done.stderr.splitlines() if line.startswith("    ")]
    assert len(example) == 5
    run_printed([sys.executable, "-c", "\n".join([*example[:-1], "np.save('y.npy', " + example[-1][6:-1] + ")"])],
                      tmp_path)
    zeros = np.zeros((4, 32), np.float32)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), onnxruntime_outputs(model, zeros)[0], rtol=RTOL,
                               atol=ATOL)


def test_ansor_compile_without_a_log_is_iree_default(tmp_path, x, capsys):
    path, out = tmp_path / "mlp.onnx", tmp_path / "plain.vmfb"
    onnx.save(mlp_onnx(), path)
    assert compile_main([str(path), "-o", str(out), "--params-out", str(tmp_path / "w.irpa")]) == 0
    assert "IREE's default configurations (no tuning log), weights in" in capsys.readouterr().err
    program = CompiledModel(out.read_bytes(), "mlp", parameters=(tmp_path / "w.irpa").read_bytes())
    np.testing.assert_allclose(program(x), onnxruntime_outputs(mlp_onnx(), x)[0], rtol=RTOL, atol=ATOL)
    assert compile_main([str(tmp_path / "none.onnx"), "-o", str(out)]) == 1
    assert re.fullmatch(r"ansor-compile: error: .*none\.onnx: no such file\n", capsys.readouterr().err)


def test_a_pytorch_model_without_torch_says_how_to_install_it(tmp_path, monkeypatch):
    path = tmp_path / "m.py"
    path.write_text("def make():\n    return None\n")
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(AnsorError, match=r"m\.py:make: PyTorch models need the torch package: install the CPU "
                                         r"build: pip install torch==2.13.0"):
        ansor_mlir.load_model(f"{path}:make")


def test_a_softmax_dispatch_keeps_iree_configuration_and_the_rest_are_tasks(target):
    """IREE raises softmax to `linalg.softmax` (no loop nest until codegen): not a task, never a crash."""
    rng = np.random.default_rng(3)
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("MatMul", ["x", "w"], ["s"], name="scores"),
         onnx.helper.make_node("Softmax", ["s"], ["y"], name="softmax", axis=-1)],
        "attention_scores", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [16, 32])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [16, 64])],
        initializer=[onnx.numpy_helper.from_array(rng.standard_normal((32, 64)).astype(np.float32), "w")],
    )
    model = opset17_model(graph)
    tasks = api.extract_tasks(model, target)
    assert [t.root.name for t in tasks] == ["linalg.matmul"]
    x = rng.standard_normal((16, 32)).astype(np.float32)
    np.testing.assert_allclose(ansor_mlir.compile(model, target)(x), onnxruntime_outputs(model, x)[0], rtol=RTOL,
                               atol=ATOL)


def test_run_pipeline_takes_a_model(tmp_path, target):
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp_onnx(), path)
    for source in (path, mlp_onnx(), ansor_mlir.load_model(path)):
        result = api.run_pipeline(source, ["ansor-extract-tasks"])
        assert "ansor.task" in str(result.module)


def test_a_scalar_input_stays_a_scalar(target):
    model = single_node_onnx("Mul", {"x": [4], "s": []}, [4])
    x, s = np.arange(4, dtype=np.float32), np.array(2.5, dtype=np.float32)
    np.testing.assert_allclose(ansor_mlir.compile(model, target)(x, s), x * s)


def test_a_boolean_mask_weight_is_embedded_too(target):
    """IREE's parameter import leaves i1 tensors as parameters: such weights stay inline, or the program built
    with embedded weights still asks the runtime for an archive (ONNX test_gather_negative_indices)."""
    from onnx import TensorProto, helper, numpy_helper

    mask = numpy_helper.from_array(np.array([True, False, True, False]), "mask")
    node = helper.make_node("Where", ["mask", "x", "y"], ["z"], name="where")
    graph = helper.make_graph([node], "where", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in "xy"],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [4])], initializer=[mask])
    model = opset17_model(graph)
    x, y = np.arange(4, dtype=np.float32), -np.arange(4, dtype=np.float32)
    source = ansor_mlir.load_model(model)
    assert not any("flow.parameter" in line and "xi1>" in line for line in source.text.splitlines())
    np.testing.assert_allclose(api.compile(source, target)(x, y), np.where([True, False, True, False], x, y))


def test_whole_program_checks_of_a_model_run_with_its_weights(tmp_path, target):
    """A model's weights live outside its text: the whole-program check must hand them to the runtime, or
    every candidate is rejected unseen and the tuned model is IREE's default."""
    from ansor_mlir.database.records import read_records

    source = ansor_mlir.load_model(mlp_onnx(features=256, hidden=256))
    assert source.parameters
    log = tmp_path / "mlp.jsonl"
    api.tune(source, target, trials_per_task=6, log=log, progress=False)
    checks = [r.program for r in read_records(log) if r.program is not None]
    assert checks, "no candidate was checked in the whole program"
    assert all(c.rounds > 0 and c.default_s > 0 for c in checks), [c.reason for c in checks]

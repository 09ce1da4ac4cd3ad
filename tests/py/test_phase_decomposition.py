"""Phase decomposition: transposed convolutions without multiplying their inserted zeros, exact, on every surface."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import AVX512_CPU, pinned_target
from onnx import TensorProto, helper, numpy_helper
from onnx_models import onnxruntime_outputs, opset17_model

import ansor_mlir
from ansor_mlir import api
from ansor_mlir.database.records import read_records
from ansor_mlir.frontend.phase_decomposition import NAME, WindowDim, mirrored, phases
from ansor_mlir.frontend.program_rewrites import rewrite_program
from ansor_mlir.mlir.iree_compiler import compile_vmfb


def conv_transpose(cin: int, cout: int, size: int, kernel: int, stride: int, pad: int = 0, output_padding: int = 0,
                   dilation: int = 1, rank: int = 2, bias: bool = False, seed: int = 0):
    """One ONNX ConvTranspose (NCHW, weights as initializers)."""
    rng = np.random.default_rng(seed)
    weights = [numpy_helper.from_array(rng.standard_normal((cin, cout, *[kernel] * rank)).astype(np.float32), "w")]
    if bias:
        weights.append(numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "b"))
    node = helper.make_node("ConvTranspose", ["x", "w", "b"][:len(weights) + 1], ["y"], strides=[stride] * rank,
                            pads=[pad] * 2 * rank, output_padding=[output_padding] * rank, dilations=[dilation] * rank)
    out = (size - 1) * stride - 2 * pad + dilation * (kernel - 1) + output_padding + 1
    graph = helper.make_graph(
        [node], "convtranspose", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, *[size] * rank])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, *[out] * rank])], initializer=weights)
    return opset17_model(graph)


def by_phases(x: np.ndarray, w: np.ndarray, dim: WindowDim) -> np.ndarray:
    """The 1-D convolution over zero-inserted `x`, computed as the phases say: over `x` itself."""
    y = np.zeros(dim.outputs)
    for phase in phases(dim):
        for q in range(phase.count):
            for t in range(phase.taps):
                j = q + dim.dilation * t + phase.shift
                if 0 <= j < dim.size:
                    y[phase.residue + dim.stride * q] += x[j] * w[phase.first_tap + dim.stride * t]
    return y


# Strides and dilations with a common factor are not decomposed (each phase would need another dilation).
@pytest.mark.parametrize("stride, kernel, dilation", [
    (s, k, d) for s in (1, 2, 3) for k in (1, 2, 3, 4, 5) for d in (1, 2, 3) if math.gcd(s, d) == 1])
def test_phases_compute_the_convolution_over_the_zero_inserted_input(stride, kernel, dilation):
    rng = np.random.default_rng(stride * 100 + kernel * 10 + dilation)
    size = 4
    for offset in range(0, dilation * (kernel - 1) + 2):
        for extra in range(0, stride + 2):
            padded = offset + stride * (size - 1) + 1 + extra
            outputs = padded - dilation * (kernel - 1)
            if outputs <= 0:
                continue
            x, w = rng.standard_normal(size), rng.standard_normal(kernel)
            z = np.zeros(padded)
            z[offset:offset + stride * (size - 1) + 1:stride] = x
            direct = [sum(z[y + dilation * k] * w[k] for k in range(kernel)) for y in range(outputs)]
            dim = WindowDim(0, 0, 0, stride, offset, size, kernel, dilation, outputs)
            np.testing.assert_allclose(by_phases(x, w, dim), direct, atol=1e-12)
            # With the filter reversed (how importers write it): the phases of the mirrored insertion of the
            # reversed x, read back to front; also when the convolution reads less than all of z.
            for unread in (0, 1):
                if outputs - unread <= 0:
                    continue
                flipped = [sum(z[y + dilation * k] * w[kernel - 1 - k] for k in range(kernel))
                           for y in range(outputs - unread)]
                short = WindowDim(0, 0, 0, stride, offset, size, kernel, dilation, outputs - unread)
                np.testing.assert_allclose(by_phases(x[::-1], w, mirrored(short))[::-1], flipped, atol=1e-12)


@pytest.mark.parametrize("shape", [
    dict(cin=6, cout=5, size=5, kernel=4, stride=2, pad=1, bias=True),   # the suite's T2D, small, with a bias
    dict(cin=3, cout=4, size=4, kernel=2, stride=3, output_padding=1),  # kernel < stride: phases without taps
    dict(cin=3, cout=2, size=6, kernel=3, stride=2, pad=1, output_padding=1, dilation=3, rank=1),
], ids=["t2d-bias", "kernel-below-stride", "1d-dilated"])
def test_convtranspose_matches_onnxruntime(shape):
    model = conv_transpose(**shape)
    x = np.random.default_rng(1).standard_normal((1, shape["cin"], *[shape["size"]] * shape.get("rank", 2)))
    x = x.astype(np.float32)
    source = ansor_mlir.load_model(model)
    assert rewrite_program(source.text, (NAME,), "m").names == (NAME,)
    (expected,) = onnxruntime_outputs(model, x)
    np.testing.assert_allclose(np.asarray(ansor_mlir.compile(source)(x)), expected, rtol=1e-5, atol=1e-5)


def test_a_reversed_filter_is_read_as_given():
    """Importers reverse the filter with a gather; on a weight given per call that copies every weight on every
    call (the suite's T2D: 8 MB, half of its time at 2 threads). The phases read the argument's own taps; only the
    input and the output, both small, are reversed."""
    from ansor_bench.workloads import make_workload
    from ansor_mlir.frontend.tensor_ir import read_gather
    from ansor_mlir.mlir.context import new_context, parse_module, producer, walk

    workload = make_workload("T2D", (1, 4, 4, 8, 6, 4, 2, 1))
    program = rewrite_program(workload.mlir, [NAME], "T2D").text
    module = parse_module(program, "T2D", new_context())
    func = next(op for op in walk(module.operation) if op.name == "func.func")
    weights = func.regions[0].blocks[0].arguments[1]
    convs = [op for op in walk(module.operation) if op.name == "linalg.conv_2d_nhwc_hwcf"]
    assert len(convs) == 4 and all(producer(c.operands[1]).operands[0] == weights for c in convs)
    gathers = [g for g in (read_gather(op.results[0]) for op in walk(module.operation) if op.name == "linalg.generic")
               if g is not None]
    assert sorted(tuple(ir_shape(g.source)) for g in gathers) == [(1, 4, 4, 8), (1, 8, 8, 6)]
    inputs = workload.inputs()
    np.testing.assert_allclose(np.asarray(ansor_mlir.compile(program, rewrites="none")(*inputs)),
                               workload.reference(inputs)[0], rtol=1e-4, atol=1e-4)


def ir_shape(value) -> list[int]:
    from iree.compiler import ir

    return list(ir.RankedTensorType(value.type).shape)


@pytest.mark.parametrize("shape", [
    dict(cin=2, cout=3, size=5, kernel=3, stride=1, pad=1),  # nothing inserted
    dict(cin=2, cout=3, size=5, kernel=3, stride=2, dilation=2),  # dilation sharing a factor with the stride
], ids=["stride-1", "dilation-2-stride-2"])
def test_other_convolutions_keep_their_text(shape):
    text = ansor_mlir.load_model(conv_transpose(**shape)).text
    assert rewrite_program(text, (NAME,), "m").text == text


def test_every_surface_sees_the_rewritten_program(tmp_path):
    """Tuning (zero-trial picks, compiled for a pinned CPU), records, apply-best and the spec's warning."""
    model = ansor_mlir.load_model(conv_transpose(cin=8, cout=8, size=4, kernel=4, stride=2, pad=1, rank=1))
    target = pinned_target(AVX512_CPU)
    log = tmp_path / "l.jsonl"
    result = api.tune(model, target, trials=0, log=log, progress=False)
    records = read_records(log)
    tasks = {t.key for t in api.extract_tasks(model, target) if t.tunable}
    assert records and {r.task_key for r in records} == tasks
    assert all(NAME in r.rewrites for r in records)  # channels-last as well: the model is NCW
    original = max(api.extract_tasks(model, target, rewrites="none"), key=lambda t: t.flops)
    assert original.key not in tasks  # the convolution over the zeros is no task of the rewritten program
    assert sum(t.flops for t in api.extract_tasks(model, target) if t.key != original.key) < original.flops
    assert api.apply_best(model, log, target) == result.module
    assert compile_vmfb(result.module, [], tmp_path / "tuned.vmfb").ok
    with pytest.warns(UserWarning, match="ansor-rewrite"):
        api.emit_tuning_spec(model, log, target)


def test_every_task_compiled_alone_has_its_key_in_the_program(target):
    """The weight flip holds four constants that IREE hoists in another order when the dispatch is compiled on
    its own: keys sort constants, or every candidate of the task failed as 'root op not found'."""
    from ansor_bench.workloads import make_workload
    from ansor_mlir.frontend.task_extraction import dispatch_executable_key, extract_tasks
    from ansor_mlir.mlir.context import new_context, ops_of, parse_module
    from ansor_mlir.mlir.iree_compiler import compile_to_phase
    from ansor_mlir.tuning.tuner import task_module

    program = rewrite_program(make_workload("T2D", (1, 4, 4, 64, 32, 4, 2, 1)).mlir, [NAME], "T2D").text
    tasks = extract_tasks(program, target, "T2D")
    assert any(task.func_text.count("arith.constant") > 1 for task in tasks)
    for task in tasks:
        ctx = new_context()
        flow = parse_module(compile_to_phase(task_module(task), target.compile_flags(), "flow", task.name), "t", ctx)
        with ctx:
            keys = [dispatch_executable_key(e, ctx) for e in ops_of(flow.body) if e.name == "flow.executable"]
        assert keys == [task.key], task.name


def test_one_phases_tuned_entry_configures_every_phase_it_matches():
    """The phases are dispatches with one root op: a tuning spec's entry for one matches all of them (IREE's
    `foreach_match` gives an op the first matcher that succeeds), and the whole-program check timed it so. The
    2-thread AVX-512 table's T2D checked one phase's strategy at 1.70x on all four and attached it to one: 1.97
    against 1.28 ms. apply-best now attaches what the spec applies, whatever order the entries come in."""
    from types import SimpleNamespace

    from ansor_bench.workloads import make_workload
    from ansor_mlir.api import as_the_spec_applies
    from ansor_mlir.codegen.tuning_spec import root_signature, spec_coverage, spec_order
    from ansor_mlir.core.schedule import Family
    from ansor_mlir.frontend.task_extraction import extract_tasks
    from ansor_mlir.tuning.progress import applied
    from ansor_mlir.tuning.task_result import TaskResult
    from ansor_mlir.tuning.verification import configure_alike

    program = rewrite_program(make_workload("T2D", (1, 4, 4, 64, 32, 4, 2, 1)).mlir, [NAME], "T2D").text
    tasks = extract_tasks(program, pinned_target(AVX512_CPU), "T2D")
    signatures = [root_signature(t) for t in tasks]
    phases = [t for t, sig in zip(tasks, signatures, strict=True) if signatures.count(sig) > 1]
    assert len(phases) == 4 and len(tasks) == 6  # and the reversals of the input and of the interleaved output
    first, last = sorted(phases, key=lambda t: t.key)[0], sorted(phases, key=lambda t: t.key)[-1]
    assert spec_coverage(tasks, [last]) == {t.key: last.key for t in phases}
    assert spec_coverage(tasks, [last, first]) == {t.key: first.key for t in phases}  # the spec's order: by key
    assert spec_order([(last, "b"), (first, "a")])[0] == [(first, "a"), (last, "b")]
    record = SimpleNamespace(family=Family.PIPELINE, is_default=False)
    chosen = as_the_spec_applies(tasks, {last.key: record})
    assert [t.key for t, r in chosen if r is record] == [t.key for t in tasks if t in phases]
    # The tuning summary says so, rather than that the other phases fell back to IREE's default.
    results = [TaskResult(t, applied_record=record if t is last else None, fell_back=t is first) for t in tasks]
    configure_alike(results)
    assert [r.configured_by for r in results if r.task in phases and r.task is not last] == [last] * 3
    assert not any(r.fell_back for r in results) and "same root op" in applied(results[tasks.index(first)])

"""Builder and runner on the real IREE: futures of results, programs and data as bytes, failures as data."""

from __future__ import annotations

import pickle
import time
from concurrent.futures import Future

import numpy as np
import pytest

from ansor_mlir.core.measure_result import ErrorKind
from ansor_mlir.core.task import IreeConfig
from ansor_mlir.measure.builder import BuildInput, BuildResult, BuiltProgram
from ansor_mlir.measure.inputs import decode_array, encode_array, make_inputs
from ansor_mlir.measure.local_builder import LocalBuilder
from ansor_mlir.measure.local_runner import LocalRunner
from ansor_mlir.measure.runner import RunInput, run_builds
from ansor_mlir.mlir.iree_compiler import compile_to_phase
from ansor_mlir.tuning.tuner import task_module

GOOD = IreeConfig(
    "DoubleTilingExpert",
    (("distribution", (32, 64, 0)), ("vector_common_parallel", (4, 16, 0)), ("vector_reduction", (0, 0, 4))),
)
BROKEN = IreeConfig("DoubleTilingExpert", (("distribution", (32,)),))


@pytest.fixture(scope="module")
def flow(small_task, target):
    return compile_to_phase(task_module(small_task), target.compile_flags(), "flow", "task")


@pytest.fixture()
def runner(target):
    with LocalRunner(target, min_time_s=0.02) as r:
        yield r


def build(target, small_task, flow, config, timeout_s=60.0) -> BuildResult:
    with LocalBuilder(target, timeout_s=timeout_s) as builder:
        future = builder.submit(BuildInput(small_task.key, flow, small_task.root_index, config))
        assert isinstance(future, Future)
        return future.result()


def test_candidate_is_checked_against_reference(target, small_task, flow, runner):
    arrays = make_inputs(small_task, seed=0)
    inputs = tuple(encode_array(a) for a in arrays)
    default = build(target, small_task, flow, None)
    assert default.ok and isinstance(default.program.vmfb, bytes) and default.program.function == "task"
    reference = runner.submit(RunInput(default.program, inputs, return_outputs=True)).result()
    assert reference.measured.ok and reference.measured.repeats >= 5
    assert reference.measured.median_s > 0 and reference.measured.spread_s >= 0
    a, b, bias = arrays
    (expected,) = reference.outputs
    np.testing.assert_allclose(decode_array(expected), np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-4)

    tuned = build(target, small_task, flow, GOOD)
    assert tuned.error == ErrorKind.NONE
    checked = runner.submit(RunInput(tuned.program, inputs, reference.outputs)).result()
    assert checked.measured.ok, checked.measured.message
    assert checked.outputs == ()

    off = (encode_array(decode_array(expected) + 1.0),)
    wrong = runner.submit(RunInput(tuned.program, inputs, off)).result().measured
    assert wrong.error == ErrorKind.WRONG_ANSWER and not wrong.ok


def test_a_run_input_is_self_contained_bytes(target, small_task, flow):
    """What a remote runner would receive: pickled, measured by a runner that never saw the build."""
    inputs = tuple(encode_array(a) for a in make_inputs(small_task, seed=0))
    program = build(target, small_task, flow, GOOD).program
    wire = pickle.dumps(RunInput(program, inputs))
    with LocalRunner(target, min_time_s=0.0, min_repeats=1) as elsewhere:
        assert elsewhere.run([pickle.loads(wire)])[0].measured.ok


def test_compile_failures_are_data(target, small_task, flow):
    broken = build(target, small_task, flow, BROKEN)
    assert broken.error == ErrorKind.COMPILE_ERROR and broken.program is None and not broken.ok
    assert broken.message
    slow = build(target, small_task, flow, GOOD, timeout_s=0.01)
    assert slow.error == ErrorKind.COMPILE_TIMEOUT


def test_failed_builds_are_results_and_the_rest_are_run(target, small_task, flow, runner):
    inputs = tuple(encode_array(a) for a in make_inputs(small_task, seed=0))
    failed = BuildResult(None, ErrorKind.COMPILE_ERROR, "error: no", 1.5)
    good = build(target, small_task, flow, GOOD)
    results = run_builds(runner, [failed, good], lambda program: RunInput(program, inputs))
    assert results[0].error == ErrorKind.COMPILE_ERROR and results[0].compile_s == 1.5
    assert results[0].message == "error: no"
    assert results[1].ok and results[1].compile_s == good.compile_s > 0


def test_a_bad_module_is_a_runtime_error(target, small_task, runner):
    inputs = tuple(encode_array(a) for a in make_inputs(small_task, seed=0))
    ghost = BuiltProgram(b"not a VM module", "task")
    assert runner.submit(RunInput(ghost, inputs)).result().measured.error == ErrorKind.RUNTIME_ERROR


def test_closing_the_runner_ends_a_run_in_flight(target, small_task, flow):
    """An interrupted tuning run must not wait for a long timing to finish."""
    inputs = tuple(encode_array(a) for a in make_inputs(small_task, seed=0))
    program = build(target, small_task, flow, GOOD).program
    runner = LocalRunner(target, timeout_s=120.0, min_time_s=60.0, max_repeats=10**9)
    future = runner.submit(RunInput(program, inputs))
    deadline = time.monotonic() + 30
    while runner._process is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)
    started = time.monotonic()
    runner.close()
    assert time.monotonic() - started < 10
    assert future.result().measured.error == ErrorKind.RUNTIME_ERROR


def test_the_run_limit_scales_with_the_expected_time(target):
    runner = LocalRunner(target, timeout_s=30.0, min_repeats=5, warmup=2)
    program = BuiltProgram(b"", "task")
    assert runner.limit_s(RunInput(program, ())) == 30.0
    assert runner.limit_s(RunInput(program, (), expected_s=2.0)) == 3.0 * (1 + 2 + 5) * 2.0
    assert runner.limit_s(RunInput(program, (), timeout_s=600.0, expected_s=2.0)) == 600.0


def test_arrays_travel_as_npy_bytes_unchanged():
    for array in (np.arange(12, dtype=np.int8).reshape(3, 4), np.linspace(-1, 1, 7, dtype=np.float16)):
        back = decode_array(encode_array(array))
        assert back.dtype == array.dtype and np.array_equal(back, array)


def test_scalar_tensors_keep_their_rank_on_the_wire():
    from ansor_mlir.measure.inputs import decode_array, encode_array, make_arrays

    (scalar, vector) = make_arrays(("tensor<f32>", "tensor<3xi8>"), "k")
    assert decode_array(encode_array(scalar)).shape == ()
    assert decode_array(encode_array(vector)).dtype == np.int8


def test_a_prepared_call_runs_the_program_as_the_invoker_does(target, small_task, flow):
    """Timed calls skip the Python invoker: the same program, the same outputs, inputs left as they were."""
    import iree.runtime as rt

    from ansor_mlir.measure.compare import load_function
    from ansor_mlir.measure.vm_call import prepared_call

    program = build(target, small_task, flow, None).program
    fn, config = load_function(program.vmfb, program.function, target.runtime_device())
    arrays = make_inputs(small_task, seed=0)
    args = [rt.asdevicearray(config.device, a) for a in arrays]
    expected = np.asarray(fn(*args).to_host())
    results = prepared_call(fn, args)()
    assert results.size == 1
    output = rt.DeviceArray(config.device, results.get_as_object(0, rt.HalBufferView)).to_host()
    np.testing.assert_array_equal(output, expected)
    for device_array, host in zip(args, arrays, strict=True):
        np.testing.assert_array_equal(device_array.to_host(), host)


def test_the_runner_times_each_placement_in_one_block_of_consecutive_calls():
    """A task's inputs stay where the last call left them, as in its program; every placement is timed."""
    from ansor_mlir.measure.run_worker import timed_in_blocks

    used: list[int] = []
    placed = [lambda i=i: used.append(i) for i in range(4)]
    times = timed_in_blocks(placed, min_repeats=5, max_repeats=40, min_time_s=0.004, warm=True)
    runs = [i for k, i in enumerate(used) if k == 0 or used[k - 1] != i]
    assert runs == [0, 1, 2, 3]  # one block per placement, in turn
    assert len(times) == len(used) - 4 and len(times) >= 8  # an untimed first call per block; 2+ timed each
    assert len(times) <= 40
    used.clear()
    assert len(timed_in_blocks(placed, min_repeats=2, max_repeats=2, min_time_s=10.0, warm=False)) == 4
    assert len(used) == 4  # a slow program: one timed call per placement, no warm-up, whatever the time

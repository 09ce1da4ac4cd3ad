"""`threads=N` tunes on IREE's multi-threaded runtime with N workers, and records keep the thread count."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import AVX2_CPU, matmul_bias_relu, pinned_target

from ansor_bench.workloads import make_workload
from ansor_mlir import api
from ansor_mlir.core.schedule import Candidate, Family, MicroKernel
from ansor_mlir.core.target import ASYNC_EXECUTION_FLAG, Target, detect_host
from ansor_mlir.core.task import main_task
from ansor_mlir.database.records import read_records
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.frontend.task_extraction import extract_tasks
from ansor_mlir.measure.local_runner import LocalRunner
from ansor_mlir.measure.vm_call import timed_call
from ansor_mlir.mlir.iree_compiler import compile_vmfb
from ansor_mlir.mlir.vm_invoke import call_outputs, is_async
from ansor_mlir.space.annotation import is_valid
from ansor_mlir.space.sketch_rules import generate_sketches
from ansor_mlir.tuning.callbacks import TuningCallback
from ansor_mlir.tuning.one_thread_start import one_thread_start, split_trials
from ansor_mlir.tuning.thread_seeds import balanced, thread_seeds, without_threads, workgroups
from ansor_mlir.tuning.tuner import TuneOptions

DUMP = "--dump_task_topologies"
# Prints the task system IREE's local-task driver starts under the given flags.
TOPOLOGY = "import sys, iree.runtime as rt; rt.flags.parse_flags(*sys.argv[1:]); rt.get_driver('local-task')" \
           ".create_default_device()"


def worker_groups(output: str) -> int:
    """Workers of the first topology in a `--dump_task_topologies` dump."""
    line = next(line for line in output.splitlines() if line.startswith("# topology[0]:"))
    return int(line.split(":")[1].split()[0])


def test_one_thread_times_on_the_calling_thread():
    assert Target(threads=1).runtime_device() == "local-sync" and Target(threads=1).runtime_flags() == ()
    assert Target(threads=4).runtime_device() == "local-task"
    assert Target(threads=4).runtime_flags() == ("--task_topology_max_group_count=4",)


def test_a_threaded_program_takes_fences_and_every_call_path_waits_for_it():
    """At threads > 1 programs are built with IREE's asynchronous ABI (the caller waits with a yielding poll,
    not IREE's spinning wait: `docs/reports/caller_wait.md`); the module, its timed calls and the runner's first call
    all pass the fences and wait. A program compiled to run on one thread is built without them
    (`device_choice.build_target`), and the same call paths run it."""
    import iree.runtime as rt

    assert ASYNC_EXECUTION_FLAG in Target(threads=2).compile_flags()
    assert ASYNC_EXECUTION_FLAG not in Target(threads=1).compile_flags()
    module = matmul_bias_relu(32, 48, 64)
    a, b, bias = (np.random.default_rng(i).uniform(-1, 1, s).astype(np.float32)
                  for i, s in enumerate(((32, 64), (64, 48), (48,))))
    expected = np.maximum(a @ b + bias, 0)
    target = resolve_target(detect_host(threads=2))
    for device in ("local-task", "local-sync"):
        model = api.compile(module, target, device=device)
        hal_device, function = model.bound()
        assert is_async(function) == (device == "local-task")
        np.testing.assert_allclose(model(a, b, bias), expected, rtol=1e-4, atol=1e-4)
        call = timed_call(model, [a, b, bias])
        for _ in range(3):  # each call waits on the last one's signal
            results = call()
        out = rt.DeviceArray(hal_device, results.get_as_ref(0).deref(rt.HalBufferView)).to_host()
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
        (first,) = call_outputs(function, hal_device, [a, b, bias])
        np.testing.assert_allclose(first.to_host(), expected, rtol=1e-4, atol=1e-4)


def test_timing_worker_starts_one_runtime_worker_per_thread(tmp_path: Path):
    """The local runner's worker, started with the target's runtime flags, times on `threads` workers (at most
    one per physical core: as many as IREE starts uncapped on a host with fewer)."""
    uncapped = worker_groups(subprocess.run([sys.executable, "-c", TOPOLOGY, DUMP], capture_output=True,
                                            text=True, check=True).stdout)
    target = Target(threads=2)
    vmfb = tmp_path / "mm.vmfb"
    assert compile_vmfb(matmul_bias_relu(16, 16, 16), target.compile_flags(), vmfb).ok
    inputs = []
    for i, shape in enumerate(((16, 16), (16, 16), (16,))):
        inputs.append(str(tmp_path / f"in{i}.npy"))
        np.save(inputs[-1], np.ones(shape, np.float32))
    request = {"device": target.runtime_device(), "vmfb": str(vmfb), "function": "mm", "inputs": inputs,
               "references": None, "save_outputs": None, "warmup": 0, "min_time_s": 0.0, "min_repeats": 1,
               "max_repeats": 1}
    command = LocalRunner(target).worker_command()
    assert command[-1] == "--task_topology_max_group_count=2"

    def groups(flags: list[str]) -> int:
        """With the dump flag, the runtime prints the task system of the worker's device as it makes it, and exits."""
        dumped = subprocess.run([*flags, DUMP], input=json.dumps(request) + "\n", capture_output=True, text=True,
                                timeout=120)
        return worker_groups(dumped.stdout)

    assert groups(command) == min(2, uncapped)
    assert groups([*command, "--task_topology_max_group_count=1"]) == 1
    answered = subprocess.run(command, input=json.dumps(request) + "\n", capture_output=True, text=True, timeout=120)
    response = json.loads(answered.stdout)
    assert "error" not in response and response["times"]


def test_tuning_with_two_threads_keeps_the_thread_count(tmp_path: Path):
    module = matmul_bias_relu(64, 64, 64)
    two = resolve_target(detect_host(threads=2))
    log = tmp_path / "log.jsonl"
    options = TuneOptions(trials=2, log=log, seed=0, policy="random", progress=False, batch_size=1)
    result = api.tune(module, two, options=options)
    # The tuned program was timed on both devices, and runs on the faster one (`tuning.device_choice`).
    assert result.device_choice is not None and result.device_choice.check is not None
    assert result.device in ("local-task", "local-sync")
    records = read_records(log)
    assert len(records) == 2 and all(r.ok for r in records), [r.result.message for r in records]
    assert {r.target for r in records} == {"llvm-cpu:host:t2"}
    assert all(r.fingerprint == two.fingerprint and r.fingerprint.endswith(":t2") for r in records)
    with pytest.raises(AnsorError) as refused:
        api.apply_best(module, log, resolve_target(detect_host(threads=1)))
    assert ":t1" in str(refused.value) and ":t2" in str(refused.value)


class NoteListener(TuningCallback):
    def __init__(self, notes: list[str]):
        self.notes = notes

    def on_note(self, message: str) -> None:
        self.notes.append(message)


def seed_order(fastest: list[Candidate], task, sketches, target: Target) -> list[str]:
    """The order `thread_seeds` measures the fastest candidates of another thread count in: each followed by its
    variants whose workgroups share out evenly over `target`'s threads (`balanced`)."""
    by_index = {s.index: s for s in sketches}
    return list(dict.fromkeys(v.identity for c in fastest
                              for v in (c, *balanced(c, by_index[c.sketch_index], task, target))))


def test_a_log_of_another_thread_count_seeds_the_search_and_is_measured_again(tmp_path: Path):
    """The task's best candidates at 1 thread open the search at 2 (`tuning.thread_seeds`): measured again on the
    2-thread runtime and recorded for it; a log of another CPU seeds nothing."""
    module = matmul_bias_relu(64, 64, 64)
    one, two = resolve_target(detect_host(threads=1)), resolve_target(detect_host(threads=2))
    log = tmp_path / "log.jsonl"
    api.tune(module, one, options=TuneOptions(trials=5, log=log, seed=0, policy="random", progress=False,
                                              batch_size=4, verify=0))
    at_one = [r for r in read_records(log) if r.ok and r.candidate.sketch_index > 0]
    task = api.extract_tasks(module, two)[0]
    sketches = api.generate_sketches(task, two)
    fastest = seed_order([r.candidate for r in sorted(at_one, key=lambda r: r.result.median_s)], task, sketches, two)
    assert len(fastest) >= 2
    notes: list[str] = []
    api.tune(module, two, options=TuneOptions(trials=3, log=log, seed=1, policy="random", progress=False,
                                              batch_size=2, verify=0), callbacks=[NoteListener(notes)])
    at_two = [r for r in read_records(log) if r.target == two.key and r.candidate.sketch_index > 0]
    assert [r.candidate.identity for r in at_two[:2]] == fastest[:2]
    assert all(r.fingerprint == two.fingerprint for r in at_two)
    assert any("another thread count on this CPU" in n for n in notes), notes

    elsewhere = tmp_path / "other_cpu.jsonl"
    elsewhere.write_text("".join(line.replace(one.fingerprint, one.fingerprint.replace(":t1", "x:t1"))
                                 for line in log.read_text().splitlines(keepends=True) if one.key in line))
    assert thread_seeds(read_records(elsewhere), two, task, sketches, 4) == []
    assert [c.identity for c in thread_seeds(read_records(log), two, task, sketches, 1)] == fastest[:1]


def test_thread_counts_are_stripped_from_keys_and_fingerprints_only():
    assert without_threads("llvm-cpu:znver3:ab12cd:t2") == "llvm-cpu:znver3:ab12cd"
    assert without_threads("llvm-cpu:host:t16") == "llvm-cpu:host"
    assert without_threads("cuda:sm_90") == "cuda:sm_90"
    assert without_threads("llvm-cpu:tiger:t") == "llvm-cpu:tiger:t"


def test_a_threaded_budget_is_split_only_when_each_phase_gets_enough_trials_per_task():
    two = Target(threads=2)
    per_task = TuneOptions(trials_per_task=64, verify=2)
    start = one_thread_start(two, per_task, tasks=3)
    assert start is not None and start.target.threads == 1 and start.target.key.endswith(":t1")
    assert (start.first.trials_per_task, start.first.verify, start.first.one_thread_share) == (32, 0, 0.0)
    assert (start.rest.trials_per_task, start.rest.verify) == (32, 2)
    assert "first 32 trials of each task" in start.note(2)
    assert one_thread_start(Target(threads=1), per_task, tasks=1) is None
    assert one_thread_start(two, dataclasses.replace(per_task, one_thread_share=0.0), tasks=1) is None
    assert one_thread_start(two, TuneOptions(trials_per_task=12), tasks=1) is None  # 6 + 6: too few
    # A budget in all is split only when each phase gives every task `MIN_PHASE_TRIALS`.
    assert split_trials(64, 0.5, tasks=4) == (32, 32) and split_trials(64, 0.5, tasks=5) is None
    assert split_trials(64, 0.25) == (16, 48)
    with pytest.raises(AnsorError, match="one_thread_share"):
        api.check_option("tune", "options.one_thread_share", 1.5, option_name="one-thread-share")


def test_a_threaded_run_measures_part_of_its_trials_on_one_thread_first(tmp_path: Path):
    """One call at threads=2: half of the task's trials on one thread, whose fastest candidates are the first
    ones measured at 2 threads (`tuning.one_thread_start`)."""
    module = matmul_bias_relu(64, 64, 64)
    one, two = resolve_target(detect_host(threads=1)), resolve_target(detect_host(threads=2))
    log = tmp_path / "log.jsonl"
    notes: list[str] = []
    result = api.tune(module, two, options=TuneOptions(trials_per_task=16, log=log, seed=0, policy="random",
                                                       progress=False, batch_size=4, verify=0),
                      callbacks=[NoteListener(notes)])
    records = read_records(log)
    at_one = [r for r in records if r.target == one.key]
    at_two = [r for r in records if r.target == two.key]
    assert len(at_one) == 8 and len(at_two) == 8 and [r.trials for r in result.one_thread] == [8]
    task = api.extract_tasks(module, two)[0]
    fastest = seed_order([r.candidate for r in sorted((r for r in at_one if r.ok and r.candidate.sketch_index > 0),
                                                      key=lambda r: r.result.median_s)],
                         task, api.generate_sketches(task, two), two)
    seeded = [r.candidate.identity for r in at_two if r.candidate.sketch_index > 0][:2]
    assert seeded == fastest[:2]
    assert any("measured on one thread" in n for n in notes), notes


def test_a_seed_from_one_thread_comes_with_variants_whose_workgroups_share_out_evenly():
    """TBS's 1-thread best makes 3 workgroups: at 2 threads it ran 305 us, the same kernel in 6 ran 259 us."""
    target = pinned_target(AVX2_CPU)
    task = main_task(extract_tasks(make_workload("TBS", (1, 128, 12, 64)).mlir, target, "TBS"))
    sketch = next(s for s in generate_sketches(task, target) if s.family is Family.TRANSFORM and s.has(MicroKernel))
    shape = (sketch.step(MicroKernel).knobs[0].options.index("4x16"),)
    values = {"d0": (4, 1), "d1": (128, 8), "d2": (128, 128), "d3": (64, 2), "micro_kernel": shape}
    seed = Candidate(task.key, sketch.index, tuple(sorted(values.items())))
    assert workgroups(seed, sketch, task) == 3
    assert not balanced(seed, sketch, task, target)  # one thread
    two = dataclasses.replace(target, threads=2)
    variants = balanced(seed, sketch, task, two)
    assert variants and all(workgroups(v, sketch, task) % 2 == 0 for v in variants)
    assert all(is_valid(sketch, dict(v.values), task, two) for v in variants)
    assert all(dict(v.values)["micro_kernel"] == shape and dict(v.values)["d1"] == values["d1"] for v in variants)
    assert not balanced(variants[0], sketch, task, two)

"""Program-level choices recorded in the log: what `tune` decided is what the log's other users build."""

from __future__ import annotations

import dataclasses
import json
import time
import warnings

import numpy as np
import pytest
from conftest import matmul_bias_relu
from test_pad_fusion import MAX_POOL, WITH_PAD_FUSION

from ansor_mlir import api
from ansor_mlir.core.target import Target, detect_host
from ansor_mlir.database.records import (
    ProgramRecord,
    TuningLog,
    program_choice,
    program_record_from_dict,
    read_program_records,
    read_records,
)
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.mlir.context import program_key
from ansor_mlir.tuning.device_choice import ONE_THREAD
from ansor_mlir.tuning.program_choice import records_target
from ansor_mlir.tuning.tuner import TuneOptions


@pytest.fixture(scope="module")
def two_threads() -> Target:
    return resolve_target(detect_host(threads=2))


def choice(target: Target, kept: bool, device: str, stamp: float = 0.0, rewrites: tuple[str, ...] = ("pad-fusion",),
           ) -> ProgramRecord:
    return ProgramRecord(target.key, target.fingerprint, program_key(MAX_POOL, "pool"), rewrites, kept, device,
                         stamp or time.time())


def test_program_records_are_their_own_lines(tmp_path, two_threads: Target):
    """Readers of candidates' records pass over them without a warning; the latest of a program is its choice."""
    log = tmp_path / "log.jsonl"
    TuningLog(log).append([choice(two_threads, True, "local-task", 1.0), choice(two_threads, False, ONE_THREAD, 2.0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_records(log) == []
    records = read_program_records(log)
    assert len(records) == 2
    key = program_key("  " + MAX_POOL, "pool")  # formatting does not change what the program is
    latest = program_choice(records, key, ("pad-fusion",), two_threads.key, two_threads.fingerprint)
    assert latest is not None and (latest.rewrites_kept, latest.device) == (False, ONE_THREAD)
    assert program_choice(records, key, (), two_threads.key, two_threads.fingerprint) is None  # other rewrites


def test_a_recorded_choice_is_what_the_logs_users_build(tmp_path, two_threads: Target):
    """The rewrites dropped and one thread chosen: `apply_best` and the spec are for the program as given (no
    warning about rewrites), `compile` builds it and runs it on one thread."""
    dropped, kept = tmp_path / "dropped.jsonl", tmp_path / "kept.jsonl"
    TuningLog(dropped).append([choice(two_threads, False, ONE_THREAD)])
    TuningLog(kept).append([choice(two_threads, True, "local-task")])
    given = api.apply_best(MAX_POOL, dropped, two_threads, "pool", rewrites="none")
    assert api.apply_best(MAX_POOL, dropped, two_threads, "pool", rewrites=WITH_PAD_FUSION) == given
    assert api.apply_best(MAX_POOL, kept, two_threads, "pool", rewrites=WITH_PAD_FUSION) != given
    with pytest.warns(UserWarning, match="configures nothing") as heard:  # the log has no task record
        api.emit_tuning_spec(MAX_POOL, dropped, two_threads, "pool", rewrites=WITH_PAD_FUSION)
    assert not any("after rewrites" in str(w.message) for w in heard)
    with pytest.warns(UserWarning) as heard:
        api.emit_tuning_spec(MAX_POOL, kept, two_threads, "pool", rewrites=WITH_PAD_FUSION)
    said = " ".join(str(w.message) for w in heard)
    assert "is for the program after rewrites pad-fusion" in said and "configures nothing" in said
    model = api.compile(MAX_POOL, two_threads, dropped, name="pool", rewrites=WITH_PAD_FUSION)
    assert model.device == ONE_THREAD
    assert api.compile(MAX_POOL, two_threads, dropped, name="pool", rewrites=WITH_PAD_FUSION,
                       device="local-task").device == "local-task"  # asked for: the record does not override it
    assert api.compile(MAX_POOL, two_threads, kept, name="pool", rewrites=WITH_PAD_FUSION).device == "local-task"
    x = np.random.default_rng(0).uniform(-1, 1, (1, 9, 9, 16)).astype(np.float32)
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
    expected = np.max([padded[:, i:i + 9, j:j + 9, :] for i in range(3) for j in range(3)], axis=0)
    np.testing.assert_array_equal(model(x), expected)


def test_tune_records_its_choices_and_compile_follows_them(tmp_path, two_threads: Target):
    """Real tuning at 2 threads with a rewrite that applies: both choices are timed and recorded, and
    `compile(log=)` runs on the device `tune` chose."""
    log = tmp_path / "log.jsonl"
    result = api.tune(MAX_POOL, two_threads, trials=2, log=log, progress=False, name="pool", rewrites=WITH_PAD_FUSION)
    assert result.rewrite_check is not None and result.device_choice is not None
    (record,) = read_program_records(log)
    assert (record.rewrites_kept, record.device) == (result.rewrite_check.kept, result.device)
    assert record.fingerprint == two_threads.fingerprint and "pad-fusion" in record.rewrites
    model = api.compile(MAX_POOL, two_threads, log, name="pool", rewrites=WITH_PAD_FUSION)
    assert model.device == result.device
    assert result.module == api.apply_best(MAX_POOL, log, two_threads, "pool", rewrites=WITH_PAD_FUSION)


def test_a_one_thread_choice_applies_the_one_thread_records(tmp_path, two_threads: Target):
    """Where `tune` ran the program on one thread with the one-thread search's choices (`records_threads=1`),
    `apply_best`, the spec and `compile` for the 2-thread target apply the 1-thread records; without that field
    (an older log) the 2-thread target's own."""
    module, log = matmul_bias_relu(32, 32, 32), tmp_path / "log.jsonl"
    one = dataclasses.replace(two_threads, threads=1)
    # No whole-program check: it could reject the candidate made the fastest below.
    api.tune(module, one, options=TuneOptions(trials=4, log=log, progress=False, verify=0), name="mm", rewrites="none")
    tuned = [r for r in read_records(log) if r.ok and not r.is_default]
    assert tuned, "the 1-thread run measured no candidate"
    # The best 1-thread record: a real candidate, made the fastest so that it is the one applied.
    fastest = dataclasses.replace(tuned[0], result=dataclasses.replace(tuned[0].result, median_s=1e-9),
                                  timestamp=time.time())
    TuningLog(log).append([fastest])
    record = ProgramRecord(two_threads.key, two_threads.fingerprint, program_key(module, "mm"), (), True, ONE_THREAD,
                           round(time.time(), 3), records_threads=1)
    assert program_record_from_dict(json.loads(record.to_json())) == record
    older = json.loads(record.to_json())
    del older["records_threads"]
    assert program_record_from_dict(older).records_threads == 0
    TuningLog(log).append([record])
    assert records_target(two_threads, record).key == one.key
    assert records_target(two_threads, dataclasses.replace(record, records_threads=0)) == two_threads
    applied = api.apply_best(module, log, two_threads, "mm", rewrites="none")
    assert applied == api.apply_best(module, log, one, "mm", rewrites="none")
    spec = api.emit_tuning_spec(module, log, two_threads, "mm", rewrites="none")
    assert spec == api.emit_tuning_spec(module, log, one, "mm", rewrites="none") and "translation_info" in spec
    model = api.compile(module, two_threads, log, name="mm", rewrites="none")
    assert model.device == ONE_THREAD
    with pytest.raises(AnsorError, match="has no record for this machine"):  # asked for: the 2-thread records
        api.compile(module, two_threads, log, name="mm", rewrites="none", device="local-task")
    a, b, bias = (np.random.default_rng(0).uniform(-1, 1, s).astype(np.float32) for s in ((32, 32), (32, 32), (32,)))
    np.testing.assert_allclose(model(a, b, bias), np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-4)
    TuningLog(log).append([dataclasses.replace(record, records_threads=0, timestamp=time.time() + 1)])
    with pytest.raises(AnsorError, match="has no record for this machine"):  # the 2-thread target has none
        api.apply_best(module, log, two_threads, "mm", rewrites="none")

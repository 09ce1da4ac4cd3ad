"""Program-level choices recorded in the log: what `tune` decided is what the log's other users build."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
from test_pad_fusion import MAX_POOL, WITH_PAD_FUSION

from ansor_mlir import api
from ansor_mlir.core.target import Target, detect_host
from ansor_mlir.database.records import (
    ProgramRecord,
    TuningLog,
    program_choice,
    read_program_records,
    read_records,
)
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.mlir.context import program_key
from ansor_mlir.tuning.device_choice import ONE_THREAD


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

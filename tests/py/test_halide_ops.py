"""The Halide contender: each expressed entry, autoscheduled by the real Adams2019 plugin, matches numpy."""

from __future__ import annotations

import re

import pytest

from ansor_bench.contenders import CONTENDERS, Settings, Unavailable, op_args
from ansor_bench.halide_ops import EXPRESSIONS, PLUGIN_FILE, halide_op, load_adams2019
from ansor_bench.timing import mismatch
from ansor_bench.workloads import make_workload
from ansor_mlir.core.target import detect_host

# Small rows of the suite's arity: padded and strided where the suite's first rows are, with extents that are no
# multiple of the vector width, so tails are exercised. Each autoschedules and compiles in a few seconds.
SMALL = {
    "GMM": (2, 8, 12, 16),
    "C2D": (1, 9, 7, 3, 8, 3, 2, 1),
    "DEP": (1, 9, 8, 16, 3, 2, 1),
    "NRM": (2, 16, 24),
    "softmax": (8, 40),
}


def settings(tmp_path) -> Settings:
    return Settings(detect_host(), trials=0, tvm_trials=0, out_dir=tmp_path)


def test_every_expression_has_a_small_shape():
    assert set(SMALL) == set(EXPRESSIONS)


@pytest.mark.parametrize("name", list(SMALL))
def test_autoscheduled_program_matches_numpy(name):
    workload = make_workload(name, SMALL[name])
    inputs = workload.inputs(seed=1)
    op = halide_op(name, op_args(workload), inputs, workload.output_shapes[0], threads=1)
    assert op.schedule, "Adams2019 returned no schedule"
    assert op.autoschedule_s >= 0 and op.compile_s > 0
    assert mismatch(op.fetch(), workload.reference(inputs)) is None
    op.call()
    assert mismatch(op.fetch(), workload.reference(inputs)) is None  # repeated calls overwrite, never accumulate


def test_contender_reports_autoscheduling_time(tmp_path):
    workload = make_workload("GMM", SMALL["GMM"])
    inputs = workload.inputs()
    prepared = CONTENDERS["halide"].prepare(workload, inputs, settings(tmp_path))
    assert CONTENDERS["halide"].name == "Halide Adams2019"
    assert mismatch(prepared.fetch(), workload.reference(inputs)) is None
    assert prepared.trials == 0 and prepared.prepare_s > 0
    assert "s autoscheduling (parallelism=1)" in prepared.note


def test_entry_without_expression_is_unavailable(tmp_path):
    workload = make_workload("T2D", (1, 4, 4, 8, 8, 4, 2, 1))
    with pytest.raises(Unavailable) as info:
        CONTENDERS["halide"].prepare(workload, workload.inputs(), settings(tmp_path))
    assert info.value.status == "skipped"
    assert info.value.reason.startswith("no Halide expression for T2D (ansor_bench/halide_ops.py expresses GMM, ")


def test_missing_plugin_names_the_path_and_the_fix(tmp_path):
    path = tmp_path / PLUGIN_FILE
    with pytest.raises(FileNotFoundError, match=re.escape(f"no {path} (pip install halide==21.0.0)")):
        load_adams2019(path)

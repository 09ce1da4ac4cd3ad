"""A sample of ONNX's node tests through import, IREE's build, tuning and the tuned build.

The full set runs with `tools/onnx_node_suite.py` (docs/reports/onnx_node_tests.md); this
sample keeps CI short: a contraction, a Gemm, an elementwise op, a reshape with
a frozen shape input, an expanded function with a dispatch that is not a task,
and an input kind the suite reports as unsupported.
"""

from __future__ import annotations

import numpy as np
import pytest

from ansor_bench.onnx_node_tests import (
    NOT_RUN,
    PASS,
    NodeTestResult,
    collect,
    markdown,
    outputs_match,
    prepare,
    run_case,
    summary,
)

# The last passing one has a dispatch that loads a value that is no binding: not a task, the rest still tune.
# test_lstm_bidirectional has dispatches that read a binding without a load (a workload ordinal): not tasks;
# rebuilding them as tasks once crashed the MLIR bindings.
SAMPLE = ("test_matmul_2d", "test_gemm_default_matrix_bias", "test_relu", "test_reshape_reordered_all_dims",
          "test_center_crop_pad_crop_and_pad_expanded", "test_lstm_bidirectional", "test_sequence_insert_at_back")


@pytest.fixture(scope="module")
def cases():
    found = {case.name: case for case in collect(SAMPLE)}
    assert sorted(found) == sorted(SAMPLE)
    return found


def test_tuning_never_turns_a_passing_test_into_a_failing_one(cases, target, tmp_path):
    results = {name: run_case(cases[name], target, trials=2, work=tmp_path) for name in SAMPLE}
    for name in SAMPLE[:-1]:
        assert (results[name].before, results[name].after) == (PASS, PASS), results[name]
    assert results["test_matmul_2d"].tasks >= 1 and results["test_gemm_default_matrix_bias"].tasks >= 1
    assert list(tmp_path.glob("test_matmul_2d.jsonl")), "the matmul was tuned, its log kept its records"
    unsupported = results["test_sequence_insert_at_back"]
    assert (unsupported.before, unsupported.after) == ("input", NOT_RUN) and "sequence" in unsupported.detail
    assert not summary(list(results.values()))["regressed"]


def test_small_integer_inputs_become_initializers(cases):
    case = cases["test_reshape_reordered_all_dims"]
    model, inputs = prepare(case.model, case.data_sets[0][0])
    assert [value.name for value in model.graph.input] == ["data"] and len(inputs) == 1
    assert [init.name for init in model.graph.initializer] == ["shape"]
    assert len(case.model.graph.input) == 2, "the test's own model is left as it was"


def test_outputs_are_compared_at_the_tests_tolerances():
    expected = [np.array([1.0, 2.0], dtype=np.float64)]
    assert outputs_match(np.array([1.0, 2.0005], dtype=np.float32), expected, 1e-3, 1e-7)[0]
    ok, why = outputs_match(np.array([1.0, 2.1], dtype=np.float32), expected, 1e-3, 1e-7)
    assert not ok and "max |difference| 0.1" in why
    assert not outputs_match(np.array([1.0]), expected, 1e-3, 1e-7)[0]
    assert outputs_match(np.array([True, False]), [np.array([True, False])], 0, 0)[0]


def test_the_report_counts_regressions_only_among_tuned_tests():
    results = [NodeTestResult("a", PASS, PASS, tasks=1, tuned=True), NodeTestResult("b", PASS, NOT_RUN),
               NodeTestResult("c", PASS, "mismatch", "output 0: max |difference| 1", 1, tuned=True),
               NodeTestResult("d", "import", NOT_RUN, "ONNX op Foo is not supported", tuned=True)]
    counts = summary(results)
    assert (counts["pass_before"], counts["tuned"], counts["pass_before_tuned"], counts["pass_after"]) == (3, 3, 2, 1)
    assert counts["regressed"] == ["c"]
    text = markdown(results, "header")
    assert "| 4 | 3 | 3 | 2 | 1 | 1 | 2 |" in text and "- `c`: mismatch: output 0" in text
    assert "| `d` | import | ONNX op Foo is not supported |" in text and "\nFoo (1)\n" in text

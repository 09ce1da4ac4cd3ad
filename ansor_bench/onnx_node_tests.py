"""ONNX's node tests as an external correctness suite: import, compile, run, tune, compile again, run again.

The onnx wheel ships the generators of its backend node tests
(`onnx.backend.test.case.node.collect_testcases()`: one model per op variant
with inputs and expected outputs). Each test goes through ansor-mlir's model
path: `load_model` (IREE's ONNX importer, weights to parameters),
`ansor_mlir.compile` with IREE's own configurations (before), then a tiny
tuning run and `ansor_mlir.compile` with its log (after). Outputs are compared
with the test's expected outputs at the test's tolerances. Tuning must never
turn a passing test into a failing one.

As IREE_NOTES.md recommends, small integer inputs (shapes, axes, indices) are
frozen into initializers, so shapes stay static, and f64 inputs are given as
f32 (IREE demotes f64 to f32 by default).
"""

from __future__ import annotations

import contextlib
import io
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

# Integer inputs up to this many elements become initializers (constants IREE sees at compile time).
FREEZE_MAX_ELEMENTS = 64
PASS = "pass"
# Stages a test can fail at, in order; "tune" only after tuning.
STAGES = ("input", "import", "compile", "run", "mismatch", "tune")
NOT_RUN = "not run"
# How a test can end in the suite's worker process (tools/onnx_node_suite.py) outside any stage.
WORKER_FAILURES = ("timeout", "crash", "error")


@dataclass(frozen=True)
class NodeTestResult:
    """What one node test did before and after tuning: `pass`, or the stage it failed at, with the reason."""

    name: str
    before: str
    after: str
    detail: str = ""
    tasks: int = 0
    seconds: float = 0.0
    tuned: bool = False  # chosen to be run after tuning too (a sample may tune only some)

    @property
    def regressed(self) -> bool:
        return self.tuned and self.before == PASS and self.after != PASS

    def to_json(self) -> dict:
        return asdict(self)


class StageError(Exception):
    def __init__(self, stage: str, detail: str):
        super().__init__(detail)
        self.stage = stage
        self.detail = detail


def collect(names: Iterable[str] | None = None) -> list:
    """The node test cases (all 1884 with onnx 1.23, or those named), in onnx's order."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    if names is None:
        return cases
    wanted = set(names)
    return [case for case in cases if case.name in wanted]


def as_array(value) -> np.ndarray:
    from onnx import TensorProto, numpy_helper

    if isinstance(value, TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(value)
    raise StageError("input", f"input of type {type(value).__name__} (sequence or optional): only tensors")


def prepare(model, inputs: Sequence) -> tuple[object, list[np.ndarray]]:
    """The model with small integer inputs frozen to initializers, and the inputs that remain (f64 as f32)."""
    from onnx import numpy_helper

    arrays = [as_array(x) for x in inputs]
    if any(a.dtype == object for a in arrays):
        raise StageError("input", "string input: IREE has no string tensors")
    model = type(model).FromString(model.SerializeToString())
    graph = model.graph
    weights = {init.name for init in graph.initializer}
    declared = [value for value in graph.input if value.name not in weights]
    if len(declared) != len(arrays):
        raise StageError("input", f"{len(arrays)} inputs given for {len(declared)} declared (optional inputs)")
    kept, runtime = [], []
    for value, array in zip(declared, arrays, strict=True):
        if np.issubdtype(array.dtype, np.integer) and array.size <= FREEZE_MAX_ELEMENTS:
            graph.initializer.append(numpy_helper.from_array(array, value.name))
        else:
            kept.append(value)
            runtime.append(array.astype(np.float32) if array.dtype == np.float64 else array)
    del graph.input[:]
    graph.input.extend(kept)
    return model, runtime


def outputs_match(outputs, expected: Sequence, rtol: float, atol: float) -> tuple[bool, str]:
    """The test's own check: same shapes, values within `atol + rtol * |expected|` (NaN where expected is)."""
    got = outputs if isinstance(outputs, tuple) else (outputs,)
    if len(got) != len(expected):
        return False, f"{len(got)} outputs, expected {len(expected)}"
    for index, (out, ref) in enumerate(zip(got, expected, strict=True)):
        out, ref = np.asarray(out), as_array(ref)
        if out.shape != ref.shape:
            return False, f"output {index}: shape {out.shape}, expected {ref.shape}"
        if ref.dtype == bool or np.issubdtype(ref.dtype, np.integer):
            if not np.array_equal(out.astype(ref.dtype), ref):
                return False, f"output {index}: {int(np.sum(out.astype(ref.dtype) != ref))} values differ"
            continue
        a, b = out.astype(np.float64), ref.astype(np.float64)
        if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
            worst = float(np.nanmax(np.abs(a - b))) if a.size else 0.0
            return False, f"output {index}: max |difference| {worst:.3g} (rtol {rtol}, atol {atol})"
    return True, ""


def build_and_check(source, target, log: Path | None, inputs, expected, rtol: float, atol: float) -> None:
    import ansor_mlir
    from ansor_mlir.errors import AnsorError

    try:
        program = ansor_mlir.compile(source, target, log)
    except AnsorError as exc:
        raise StageError("compile", str(exc)) from None
    try:
        outputs = program(*inputs)
    except Exception as exc:  # the runtime raises RuntimeError/ValueError for bad calls: a failed run
        raise StageError("run", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    ok, why = outputs_match(outputs, expected, rtol, atol)
    if not ok:
        raise StageError("mismatch", why)


def tune_tasks(source, target, trials: int, log: Path, seed: int) -> int:
    """Tune the model (`trials` per task); how many tasks were tuned, 0 where extraction finds nothing to tune.

    A model with nothing to tune (a zero-size tensor, only untileable ops) is built with IREE's own
    configurations after tuning too, as `ansor-compile` would build it, so it is not a failure of tuning.
    """
    from ansor_mlir import api
    from ansor_mlir.errors import AnsorError

    try:
        return len(api.tune(source, target, trials_per_task=trials, log=log, seed=seed, progress=False).tasks)
    except AnsorError as exc:
        if "nothing to tune" in str(exc):
            return 0
        raise


def run_case(case, target, trials: int, work: Path, seed: int = 0, tune: bool = True) -> NodeTestResult:
    """One node test before and (with `tune`) after a tiny tuning run (`trials`, the tuner's budget; logs in `work`).
    """
    import ansor_mlir
    from ansor_mlir.errors import AnsorError

    start = time.perf_counter()
    inputs, expected = case.data_sets[0]
    try:
        model, runtime_inputs = prepare(case.model, inputs)
        try:
            source = ansor_mlir.load_model(model, name=case.name)
        except AnsorError as exc:
            raise StageError("import", str(exc)) from None
        build_and_check(source, target, None, runtime_inputs, expected, case.rtol, case.atol)
    except StageError as exc:
        return NodeTestResult(case.name, exc.stage, NOT_RUN, exc.detail, 0, time.perf_counter() - start, tune)
    if not tune:
        return NodeTestResult(case.name, PASS, NOT_RUN, "", 0, time.perf_counter() - start)
    log = work / f"{case.name}.jsonl"
    tasks = 0
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tasks = tune_tasks(source, target, trials, log, seed)
        build_and_check(source, target, log if log.exists() else None, runtime_inputs, expected, case.rtol,
                        case.atol)
    except StageError as exc:
        return NodeTestResult(case.name, PASS, exc.stage, exc.detail, tasks, time.perf_counter() - start, True)
    except Exception as exc:  # a crash while tuning is a failure after tuning, recorded with its type
        detail = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return NodeTestResult(case.name, PASS, "tune", detail, tasks, time.perf_counter() - start, True)
    return NodeTestResult(case.name, PASS, PASS, "", tasks, time.perf_counter() - start, True)


def run_cases(cases: Sequence, target, trials: int, seed: int = 0, on_result=None) -> list[NodeTestResult]:
    """Every case before and after tuning, in this process."""
    results = []
    with tempfile.TemporaryDirectory(prefix="onnx-node-tests-") as tmp:
        for case in cases:
            result = run_case(case, target, trials, Path(tmp), seed)
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results


def summary(results: Sequence[NodeTestResult]) -> dict:
    """Counts; `tuned` are the tests also run after tuning, `pass_before_tuned` those of them passing before."""
    before = Counter(r.before for r in results)
    tuned = [r for r in results if r.tuned]
    return {
        "tests": len(results),
        "pass_before": before[PASS],
        "tuned": len(tuned),
        "pass_before_tuned": sum(1 for r in tuned if r.before == PASS),
        "pass_after": sum(1 for r in tuned if r.after == PASS),
        "regressed": [r.name for r in results if r.regressed],
        "with_tasks": sum(1 for r in tuned if r.tasks),
        "failed_before_by_stage": {stage: before[stage] for stage in (*STAGES, *WORKER_FAILURES) if before[stage]},
    }


def markdown(results: Sequence[NodeTestResult], header: str) -> str:
    """docs/reports/onnx_node_tests.md: counts, the regressions (none expected), and every failure with its reason."""
    s = summary(results)
    lines = [
        "# ONNX node tests through ansor-mlir", "", header, "",
        "| tests | pass (IREE's configurations) | tuned | of those, pass before tuning | pass after tuning "
        "| regressions | tuned tests with tasks |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        f"| {s['tests']} | {s['pass_before']} | {s['tuned']} | {s['pass_before_tuned']} | {s['pass_after']} "
        f"| {len(s['regressed'])} | {s['with_tasks']} |",
        "", "Failures before tuning, by stage: "
        + (", ".join(f"{stage} {count}" for stage, count in s["failed_before_by_stage"].items()) or "none") + ".",
        "", "## Turned from pass to fail by tuning", "",
    ]
    regressed = [r for r in results if r.regressed]
    lines += [f"- `{r.name}`: {r.after}: {r.detail}" for r in regressed] or ["None."]
    unsupported = Counter(r.detail.split("ONNX op ", 1)[1].split(" ", 1)[0] for r in results
                          if r.before == "import" and "ONNX op " in r.detail)
    if unsupported:
        lines += ["", "## ONNX ops IREE's importer does not lower (tests failing at import)", "",
                  ", ".join(f"{op} ({count})" for op, count in sorted(unsupported.items(), key=lambda i: -i[1]))]
    lines += ["", "## Failing before tuning", "", "| test | stage | reason |", "| --- | --- | --- |"]
    for r in results:
        if r.before != PASS:
            reason = r.detail.replace("|", "\\|").replace("\n", " ")[:300]
            lines.append(f"| `{r.name}` | {r.before} | {reason} |")
    return "\n".join(lines) + "\n"

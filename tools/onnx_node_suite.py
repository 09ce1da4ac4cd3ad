"""Run ONNX's node tests through ansor-mlir before and after tuning; write the pass counts to docs.

    python tools/onnx_node_suite.py --docs docs/reports/onnx_node_tests.md         # all 1884, each tuned (hours)
    python tools/onnx_node_suite.py --tune-every 5 --docs docs/reports/onnx_node_tests.md  # all before, every 5th tuned
    python tools/onnx_node_suite.py --tests test_relu,test_matmul_2d               # a few, printed

Every test runs in a worker process (`--jobs` of them at once) with a time limit (a hung compile costs
one test, recorded as `timeout`; a worker that dies, `crash`). Results are appended to
`--results` (JSON lines) as they come; rerunning with the same file skips the
tests already there, so an interrupted run resumes. Needs onnx (the importers
extra); each test's tuning log is temporary.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ansor_bench.onnx_node_tests import (  # noqa: E402
    NOT_RUN,
    NodeTestResult,
    collect,
    markdown,
    run_case,
    summary,
)


def _worker_run(case, target_name: str, trials: int, seed: int, tune: bool, work: str) -> dict:
    from ansor_mlir import api

    return run_case(case, api.resolve_target(target_name), trials, Path(work), seed, tune).to_json()


def read_results(path: Path) -> dict[str, NodeTestResult]:
    if not path.exists():
        return {}
    found = {}
    for line in path.read_text().splitlines():
        if line.strip():
            result = NodeTestResult(**json.loads(line))
            found[result.name] = result
    return found


def _executor() -> ProcessPoolExecutor:
    return ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), max_tasks_per_child=100)


def _kill(executor: ProcessPoolExecutor) -> None:
    """Stop a worker stuck in a test (the executor has no public way to)."""
    for process in list(getattr(executor, "_processes", {}).values()):
        process.kill()
    executor.shutdown(wait=False, cancel_futures=True)


def _outcome(future, case, start: float, tune: bool) -> tuple[NodeTestResult, bool]:
    """A finished test's result, and whether its worker died (its executor must be replaced)."""
    seconds = time.perf_counter() - start
    error = future.exception()
    if error is None:
        return NodeTestResult(**future.result()), False
    if isinstance(error, BrokenProcessPool):  # the worker died: a crash in IREE's runtime or compiler bindings
        return NodeTestResult(case.name, "crash", NOT_RUN, "the worker process died", seconds=seconds,
                              tuned=tune), True
    # raised outside a stage: one test's failure, not the run's
    return NodeTestResult(case.name, "error", NOT_RUN, f"{type(error).__name__}: {error}", seconds=seconds,
                          tuned=tune), False


def run(cases, args, done: dict[str, NodeTestResult]) -> list[NodeTestResult]:
    """Every case not in `done`, `args.jobs` at a time, each job in its own one-worker executor (so a
    test over the time limit is stopped by killing its worker alone)."""
    results = {case.name: done[case.name] for case in cases if case.name in done}
    pending = [(number, case) for number, case in enumerate(cases) if case.name not in done]
    slots = [_executor() for _ in range(args.jobs)]
    running: dict = {}  # future -> (slot, number, case, start, tune)
    with tempfile.TemporaryDirectory(prefix="onnx-node-suite-") as work, args.results.open("a") as out:
        while pending or running:
            busy = {slot for slot, *_ in running.values()}
            for slot in (s for s in range(args.jobs) if s not in busy):
                if not pending:
                    break
                number, case = pending.pop(0)
                tune = number % args.tune_every == 0
                future = slots[slot].submit(_worker_run, case, args.target, args.trials, args.seed, tune, work)
                running[future] = (slot, number, case, time.perf_counter(), tune)
            finished, _ = wait(running, timeout=1.0, return_when=FIRST_COMPLETED)
            for future, (slot, number, case, start, tune) in list(running.items()):
                if future in finished:
                    result, died = _outcome(future, case, start, tune)
                elif time.perf_counter() - start > args.timeout:
                    result, died = NodeTestResult(case.name, "timeout", NOT_RUN, f"over {args.timeout:.0f} s",
                                                  seconds=time.perf_counter() - start, tuned=tune), True
                    _kill(slots[slot])
                else:
                    continue
                if died:
                    slots[slot] = _executor()
                del running[future]
                results[case.name] = result
                out.write(json.dumps(result.to_json()) + "\n")
                out.flush()
                print(f"[{number + 1}/{len(cases)}] {result.name}: before {result.before}, after {result.after}"
                      f" ({result.seconds:.1f} s){': ' + result.detail[:160] if result.detail else ''}", flush=True)
    for executor in slots:
        _kill(executor)
    return [results[case.name] for case in cases]


def header(args, results: list[NodeTestResult]) -> str:
    import onnx
    from iree.compiler import version

    seconds = sum(r.seconds for r in results)
    count = sum(1 for r in results if r.tuned)
    # A resumed run keeps each recorded test's own setting, so the count comes from the results.
    tuned = "every test is" if count == len(results) else (
        f"{count} of them (`--tune-every k` tunes every k-th in onnx's order; a resumed run keeps the tests "
        "already recorded as they were) are")
    return (
        f"Generated by `python tools/onnx_node_suite.py --tune-every {args.tune_every} --trials {args.trials} "
        f"--results {args.results}` "
        f"(onnx {onnx.__version__}, IREE {version.VERSION}, {platform.processor() or platform.machine()}, "
        f"{time.strftime('%Y-%m-%d')}; {seconds / 3600:.1f} h of test time). Each of the "
        f"{len(results)} node tests from `onnx.backend.test.case.node.collect_testcases()` is imported with "
        "IREE's ONNX importer, built with IREE's own configurations and run (before); "
        f"{tuned} then tuned with trials={args.trials} (the tuner measures and checks its candidates against "
        "IREE's build), built with the log and run again (after). Outputs are compared with the test's expected "
        "outputs at its tolerances. Small integer inputs (shapes, axes) are frozen into initializers and f64 "
        "inputs given as f32, as IREE_NOTES.md recommends; sequence, optional and string inputs are not supported."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", help="comma-separated test names (default: all)")
    parser.add_argument("--tune-every", type=int, default=1, help="tune every k-th test (default 1: all)")
    parser.add_argument("--trials", type=int, default=2, help="tuning budget per test (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", default="llvm-cpu")
    parser.add_argument("--jobs", type=int, default=1, help="tests run at once, one worker process each (default 1)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per test (default 600)")
    parser.add_argument("--results", type=Path, default=Path("onnx_node_results.jsonl"),
                        help="JSON lines, appended and resumed (default onnx_node_results.jsonl)")
    parser.add_argument("--docs", type=Path, help="write the report here (e.g. docs/reports/onnx_node_tests.md)")
    args = parser.parse_args(argv)
    cases = collect(args.tests.split(",") if args.tests else None)
    if not cases:
        print("onnx_node_suite: error: no such test", file=sys.stderr)
        return 1
    results = run(cases, args, read_results(args.results))
    counts = summary(results)
    print(json.dumps({k: v for k, v in counts.items() if k != "regressed"}), f"regressed: {counts['regressed']}")
    if args.docs:
        args.docs.write_text(markdown(results, header(args, results)))
    return 1 if counts["regressed"] else 0


if __name__ == "__main__":
    sys.exit(main())

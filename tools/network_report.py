"""Tune whole networks and time them against IREE's default, onnxruntime and PyTorch eager.

With `--docs`, writes the report (docs/reports/networks.md):

    python tools/network_report.py --docs docs/reports/networks.md               # ResNet-50, MobileNetV2, BERT
    python tools/network_report.py --models bert --threads 1 --trials-per-task 4  # one, quick
    python tools/network_report.py --models resnet18 --rewrites channels-last+winograd --time-budget 20m

Each model (examples/models) is exported to ONNX once; ansor-mlir imports that
file and tunes it at each thread count with a total budget of
`--trials-per-task` times its number of tasks, shared out by the task
scheduler; the logs live in `--work` (a rerun resumes them, measuring nothing
twice). The tuned build, IREE's default build, onnxruntime and PyTorch eager
are then timed alternately in one process, every output checked against
PyTorch's. Results are appended to `--work/results.jsonl` as they come, so the
doc can be written from a partial run. `--unseen` also takes a model no test
has seen from a fresh `.onnx` file to a tuned `.vmfb` with one `ansor-compile`
command, and times it against IREE's default build of the same file.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

from ansor_bench.heap import keep_freed_memory  # noqa: E402
from ansor_bench.networks import NetworkResult, export, markdown, measure_network, tune_network  # noqa: E402
from ansor_bench.report import provenance  # noqa: E402
from ansor_mlir.frontend.program_rewrites import DEFAULT_REWRITES  # noqa: E402

MODELS = {
    "resnet18": "examples/models/resnet.py:resnet18",
    "resnet50": "examples/models/resnet.py:resnet50",
    "mobilenet_v2": "examples/models/mobilenet_v2.py:mobilenet_v2",
    "bert": "examples/models/bert.py:bert_layer",
}
UNSEEN_SOURCE = '''
import torch
from torch import nn


class KeywordSpotter(nn.Module):
    """A small audio-keyword CNN a user might bring: conv stack over a 40x98 log-mel map, then an MLP."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 64, 3, padding=1, groups=64), nn.Conv2d(64, 128, 1), nn.ReLU(),
        )
        self.head = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 12))

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


def keyword_spotter():
    torch.manual_seed(7)
    return KeywordSpotter().eval(), (torch.randn(1, 1, 40, 98),)
'''


def read_results(path: Path) -> dict[tuple[str, int], NetworkResult]:
    done = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                result = NetworkResult(**json.loads(line))
                done[(result.model, result.threads)] = result
    return done


def run_networks(args) -> list[NetworkResult]:
    results_path = args.work / "results.jsonl"
    done = read_results(results_path)
    for threads in args.threads:
        for name in args.models:
            if (name, threads) in done or args.report_only:
                continue
            onnx_path = export(MODELS[name], args.work / f"{name}.onnx")
            log = args.work / f"{name}_t{threads}.jsonl"
            from ansor_mlir import api
            from ansor_mlir.core.target import parse_target

            source = api.load_model(onnx_path)
            target = api.resolve_target(parse_target("llvm-cpu", threads=threads))
            tasks = sum(t.tunable for t in api.extract_tasks(source, target, rewrites=args.rewrites))
            trials = args.trials_per_task * tasks
            print(f"{name} at {threads} thread(s): {tasks} tasks, {trials} trials", flush=True)
            tune_s = tune_network(source, target, trials, log, args.seed, rewrites=args.rewrites,
                                  time_budget=args.time_budget)
            result = measure_network(name, MODELS[name], onnx_path, source, target, log, tasks, trials, tune_s,
                                     rewrites=args.rewrites)
            print(json.dumps(result.to_json()), flush=True)
            with results_path.open("a") as out:
                out.write(json.dumps(result.to_json()) + "\n")
            done[(name, threads)] = result
    return [done[(n, t)] for t in args.threads for n in args.models if (n, t) in done]


def run_unseen(args) -> str:
    """`.onnx` -> tuned `.vmfb` in one command; the result checked against onnxruntime and timed against IREE's."""
    import numpy as np
    import onnxruntime as ort

    import ansor_mlir
    from ansor_bench.timing import mismatch, time_alternately
    from ansor_mlir.mlir.iree_module import CompiledModel

    work = args.work / "unseen"
    work.mkdir(parents=True, exist_ok=True)
    (work / "keyword_spotter.py").write_text(UNSEEN_SOURCE)
    onnx_path = export(f"{work / 'keyword_spotter.py'}:keyword_spotter", work / "keyword_spotter.onnx")
    command = ["ansor-compile", str(onnx_path), "-o", str(work / "tuned.vmfb"), "--trials", str(args.unseen_trials)]
    start = time.perf_counter()
    subprocess.run(command, check=True)
    seconds = time.perf_counter() - start
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((1, 1, 40, 98), dtype=np.float32)
    default = ansor_mlir.compile(onnx_path, rewrites="none")
    tuned = CompiledModel((work / "tuned.vmfb").read_bytes(), default.function)
    expected = session.run(None, {session.get_inputs()[0].name: x})
    why = mismatch([tuned(x)], [np.asarray(expected[0])])
    timings = time_alternately({"tuned": lambda: tuned(x), "iree_default": lambda: default(x)}, rounds=15,
                               min_round_s=0.1)
    ratio = timings["iree_default"].median_s / timings["tuned"].median_s
    return (
        f"`ansor-compile keyword_spotter.onnx -o tuned.vmfb --trials {args.unseen_trials}`"
        f" ({seconds / 60:.1f} min, 1 thread) on a keyword-spotting CNN defined only in this tool (conv, strided "
        f"conv, depthwise and pointwise convs, an MLP head; random weights, exported to ONNX opset 17): outputs "
        f"{'match onnxruntime' if why is None else 'DIFFER from onnxruntime: ' + why}; tuned "
        f"{timings['tuned'].median_s * 1e3:.3f} ms against IREE's default build of the same file "
        f"{timings['iree_default'].median_s * 1e3:.3f} ms: **{ratio:.2f}x**."
    )


def write_doc(path: Path, args, results: list[NetworkResult], unseen: str | None) -> None:
    text = [
        "# Whole networks, end to end",
        "",
        f"{provenance('network_report.py', sys.argv[1:], ROOT)}, a shared 2-core machine: compare the ratios, "
        "not the times.",
        "",
        "Each model from `examples/models` (random weights, batch 1) is exported to ONNX; ansor-mlir imports the "
        "file, tunes it at each thread count with the total budget in the table's trials column (a number of "
        "trials per unique task, shared out by the task scheduler, Ansor's gradient scheduler by default; see "
        "[task_scheduler.md](task_scheduler.md)), and builds it with the log. The tuned build, IREE's default "
        "build of the same imported IR, onnxruntime (CPU provider, `intra_op_num_threads` = threads) and PyTorch eager "
        "(`torch.set_num_threads`) run the same input, timed alternately in one process; every output is checked "
        "against PyTorch's. Goal: 1.5x IREE's default and 1.1x onnxruntime.",
        "",
        markdown(results),
    ]
    if args.note:
        text += [args.note, ""]
    if unseen:
        text += ["## A model no test has seen, in one command", "", unseen, ""]
    path.write_text("\n".join(text))


def main(argv: list[str] | None = None) -> int:
    keep_freed_memory()  # before any contender allocates (`ansor_bench/heap.py`)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet50,mobilenet_v2,bert",
                        help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--trials-per-task", type=int, default=8, help="total budget per unique task (default 8)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rewrites", default=DEFAULT_REWRITES,
                        help=f"program rewrites for tuning and the tuned build, as ansor-compile's --rewrites "
                             f"(default: {DEFAULT_REWRITES})")
    parser.add_argument("--time-budget", default=None, help="per model and thread count, as ansor-compile's (30m)")
    parser.add_argument("--work", type=Path, default=Path("build/networks"), help="logs, ONNX files, results")
    parser.add_argument("--unseen", action="store_true", help="also the unseen model through ansor-compile")
    parser.add_argument("--unseen-trials", type=int, default=48)
    parser.add_argument("--docs", type=Path, help="write the report here (e.g. docs/reports/networks.md)")
    parser.add_argument("--note", default="", help="a paragraph for the doc: how this run came about")
    parser.add_argument("--report-only", action="store_true",
                        help="write the doc from the results in --work; tune and time nothing more")
    args = parser.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        print(f"network_report: error: unknown model {unknown[0]}: choose from {', '.join(MODELS)}", file=sys.stderr)
        return 2
    args.threads = [int(t) for t in args.threads.split(",")]
    args.work.mkdir(parents=True, exist_ok=True)
    import iree.runtime as rt

    rt.flags.parse_flags(f"--task_topology_max_group_count={max(args.threads)}")
    results = run_networks(args)
    unseen_file = args.work / "unseen" / "result.md"
    if args.unseen and not args.report_only:
        unseen_file.parent.mkdir(parents=True, exist_ok=True)
        unseen_file.write_text(run_unseen(args))
    unseen = unseen_file.read_text() if unseen_file.exists() else None
    if args.docs:
        write_doc(args.docs, args, results, unseen)
    return 0


if __name__ == "__main__":
    sys.exit(main())

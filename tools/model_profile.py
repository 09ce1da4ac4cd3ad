"""Profile whole models: each dispatch of their IREE builds beside onnxruntime's nodes; writes a doc.

    python tools/model_profile.py --models resnet50,mobilenet_v2 --docs docs/reports/model_profile.md
    python tools/model_profile.py --models resnet50 --log resnet50=build/networks/resnet50_t1.jsonl
    python tools/model_profile.py --models my_model.onnx --iterations 3 --rounds 3

Each model (a bundled name, `file.py:factory` or an `.onnx` file) is exported
to ONNX once; ansor-mlir imports that file and builds it three ways: IREE's
default (the model as imported), ansor-mlir's program rewrites with IREE's
configurations, and, given `--log NAME=LOG`, the tuned program. The builds
and onnxruntime are checked against onnxruntime's outputs and timed
alternately in one process, the FMA peak kernel among them; then each build
is profiled by IREE's runtime (`iree-benchmark-module`, HAL host-execution
events) and onnxruntime by its own profiler (`ansor_bench.model_profile`).
Results are appended to `--work/profiles.jsonl` as they come; the doc is
written from that file, so `--report-only` rewrites it without measuring.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

from ansor_bench.heap import keep_freed_memory  # noqa: E402
from ansor_bench.model_profile import ModelProfile, model_markdown, op_rows  # noqa: E402
from ansor_bench.op_shapes import CONTRACTION, LAYOUT  # noqa: E402
from ansor_bench.report import provenance  # noqa: E402
from ansor_mlir.errors import AnsorError  # noqa: E402

MODELS = {
    "resnet50": "examples/models/resnet.py:resnet50",
    "resnet18": "examples/models/resnet.py:resnet18",
    "mobilenet_v2": "examples/models/mobilenet_v2.py:mobilenet_v2",
    "bert": "examples/models/bert.py:bert_layer",
    "tiny_cnn": "examples/models/tiny.py:tiny_cnn",
}


def model_name(model: str) -> str:
    """A bundled model's name, else the file's stem (`path/net.onnx`, `path/net.py:factory` -> the factory)."""
    if model in MODELS:
        return model
    if model.endswith(".onnx") or ":" not in model:
        return Path(model).stem
    return model.rsplit(":", 1)[1]


def model_inputs(model: str, onnx_path: Path) -> list:
    """The factory's example inputs; for an `.onnx` file, seeded standard-normal arrays of its input shapes."""
    import numpy as np

    reference = MODELS.get(model, model)
    if not reference.endswith(".onnx"):
        from ansor_mlir.frontend.torch_import import load_factory

        _, inputs = load_factory(str(ROOT / reference) if reference in MODELS.values() else reference)
        return [x.numpy() for x in inputs]
    import onnxruntime as ort

    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    return [rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)
            for i in session.get_inputs()]


def onnx_file(model: str, work: Path) -> Path:
    """The model as an ONNX file: itself, or exported once into `work`."""
    from ansor_bench.networks import export

    reference = MODELS.get(model, model)
    if reference.endswith(".onnx"):
        path = Path(reference)
        if not path.is_file():
            raise AnsorError(f"{reference}: no such file: give a bundled model ({', '.join(MODELS)}), "
                             "file.py:factory or an .onnx file")
        return path
    full = str(ROOT / reference) if model in MODELS else reference
    return export(full, work / f"{model_name(model)}.onnx")


def read_profiles(path: Path) -> dict[tuple[str, int], ModelProfile]:
    done = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                profile = ModelProfile.from_json(json.loads(line))
                done[(profile.model, profile.threads)] = profile
    return done


def summary(profiles: list[ModelProfile]) -> str:
    """One row per model and build: end to end against onnxruntime, where the time goes, the largest gap."""
    lines = ["| model | threads | build | call (ms) | onnxruntime (ms) | onnxruntime ÷ build | in contractions "
             "| in layout dispatches | outside kernels | largest gap to onnxruntime (op kind: ms ours - theirs) |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    for p in profiles:
        ort_ms = p.median_ms["onnxruntime"]
        for build in p.iree:
            rows = op_rows(build, p.onnxruntime)
            contraction = sum(r.ours_s for r in rows if r.shape.category == CONTRACTION)
            layout = sum(t.seconds for t in build.dispatches if t.dispatch.shape.category == LAYOUT)
            kind, gap = gaps(p, build)
            ms = p.median_ms[build.label]
            lines.append(f"| {p.model} | {p.threads} | {build.label} | {ms:.2f} | {ort_ms:.2f} | {ort_ms / ms:.2f}x "
                         f"| {100 * contraction / build.call_s:.0f}% | {100 * layout / build.call_s:.0f}% "
                         f"| {100 * build.outside_s / build.call_s:.0f}% | {kind}: {gap * 1e3:+.2f} |")
    return "\n".join(lines) + "\n"


def gaps(profile: ModelProfile, build) -> tuple[str, float]:
    """The op kind (or the time outside kernels) where `build` loses most time to onnxruntime, and how much."""
    totals: dict[str, float] = {}
    for row in op_rows(build, profile.onnxruntime):
        totals[row.kind] = totals.get(row.kind, 0.0) + row.ours_s - row.theirs_s
    totals["outside kernels"] = build.outside_s - profile.onnxruntime.outside_s
    return max(totals.items(), key=lambda item: item[1])


def five_lines(profiles: list[ModelProfile], rewrites: str = "") -> list[str]:
    """The report's summary: what, where, the result per model (its last build), the caveat, how to regenerate."""
    from ansor_bench.report import cpu_model

    results = []
    for p in profiles:
        build = p.iree[-1]
        kind, gap = gaps(p, build)
        results.append(f"{p.model} ({build.label}, {p.threads} thread{'s' if p.threads > 1 else ''}): "
                       f"{p.median_ms['onnxruntime'] / p.median_ms[build.label]:.2f}x onnxruntime end to end "
                       f"({p.onnxruntime.run_s / build.call_s:.2f}x between the profiled calls), most of the gap "
                       f"in {kind} ({gap * 1e3:+.1f} ms a call); outside kernels "
                       f"{100 * build.outside_s / build.call_s:.0f}% of the call (onnxruntime's "
                       f"{100 * p.onnxruntime.outside_s / p.onnxruntime.run_s:.0f}%)")
    rounds = sorted({p.rounds for p in profiles})
    iterations = sorted({b.iterations for p in profiles for b in p.iree})
    return [
        "- **What:** each dispatch of whole models' IREE builds (IREE's default, ansor-mlir's rewrites, tuned where "
        "a log is given) beside onnxruntime's nodes, matched by op kind and shape, and the time outside kernels.",
        f"- **Where:** {cpu_model()}, {', '.join(sorted({str(p.threads) for p in profiles}))} thread(s).",
        f"- **Result:** {'; '.join(results)}.",
        f"- **Caveat:** a machine shared with other work, short repeats ({'/'.join(map(str, iterations))} profiled "
        f"calls, {'/'.join(map(str, rounds))} alternated rounds): rough times, compare ratios and shares.",
        f"- **Regenerate:** `{regenerate(profiles, rewrites)}`.",
    ]


def regenerate(profiles: list[ModelProfile], rewrites: str = "") -> str:
    """The command that measures these profiles again (a tuned build's log named by its model)."""
    models = ",".join(dict.fromkeys(p.model for p in profiles))
    threads = ",".join(dict.fromkeys(str(p.threads) for p in profiles))
    logs = "".join(f" --log {p.model}=LOG" for p in profiles if p.iree[-1].label == "tuned")
    with_rewrites = f" --rewrites {rewrites}" if rewrites else ""
    return (f"python tools/model_profile.py --models {models} --threads {threads}{logs}{with_rewrites} "
            "--docs docs/reports/model_profile.md")


def write_doc(path: Path, argv: list[str], profiles: list[ModelProfile], note: str, rewrites: str = "") -> None:
    text = [
        "# Where a whole model's time goes, against onnxruntime",
        "",
        *five_lines(profiles, rewrites),
        "",
        f"{provenance('model_profile.py', argv, ROOT)}. The machine is shared with other work: the numbers "
        "are rough, compare the ratios and shares, not the times.",
        "",
        "Each model (random weights, batch 1) is exported to ONNX; ansor-mlir imports the file and builds it as "
        "IREE's default (`iree_default`: the model as imported), with ansor-mlir's program rewrites and IREE's "
        "configurations (`rewritten`), and with a tuning log where one is given (`tuned`). The builds and "
        "onnxruntime (CPU provider) are checked against onnxruntime's outputs and timed alternately in one "
        "process with the FMA peak kernel (`ansor_bench.roofline`), whose rate in those rounds is the peak every "
        "% below is against. Each build is then profiled by IREE's own runtime (`iree-benchmark-module "
        "--device_profiling_mode=host-execution`, `iree-profile statistics`): every dispatch's time in whole "
        "calls, its runs per call checked against the dispatches of the build's flow-level IR, and the queue's "
        "allocations and command-buffer executions. onnxruntime profiles its nodes (`enable_profiling`; the "
        "first run is a warm-up and dropped). Ops are matched by kind and shape: output elements times "
        "reduction elements per output, read off a dispatch's root and off a node's shapes. A profiled call "
        "carries the profiler's own cost (about a microsecond per dispatch), so its time runs a little over "
        "the alternated median.",
        "",
        "Reading the tables: *outside kernels* is the profiled call minus its dispatches (IREE) or the run minus "
        "its nodes (onnxruntime); *command buffers beyond dispatches* is barriers, copies, fills and issuing; "
        "*host* is the VM, argument and result buffers and waits. *Dispatches reading weights only* are layout "
        "changes of weights run on every call. `% roofline` is the time the op would take at the FMA peak or at "
        "the triad bandwidth of the cache level its operands fit in, whichever is longer, over its time.",
        "",
    ]
    if note:
        text += [note, ""]
    text += ["## Summary", "", summary(profiles)]
    text += [model_markdown(p) for p in profiles]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(text))


def main(argv: list[str] | None = None) -> int:
    keep_freed_memory()  # before any contender allocates (`ansor_bench/heap.py`)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet50,mobilenet_v2",
                        help=f"comma-separated: {', '.join(MODELS)}, file.py:factory or .onnx files")
    parser.add_argument("--threads", default="1", help="comma-separated thread counts (default 1)")
    parser.add_argument("--log", action="append", default=[], metavar="NAME=LOG",
                        help="a tuning log for one model: also profile its tuned build (repeatable)")
    parser.add_argument("--rewrites", default="",
                        help="program rewrites the logs were tuned with, as ansor-compile --rewrites takes them "
                             "(default: the default rewrites)")
    parser.add_argument("--iterations", type=int, default=5, help="profiled calls of each build (default 5)")
    parser.add_argument("--rounds", type=int, default=5, help="alternated timing rounds (default 5)")
    parser.add_argument("--ort-runs", type=int, default=10, help="profiled onnxruntime runs (default 10)")
    parser.add_argument("--min-round-s", type=float, default=0.2, help="each contender's slice of a round")
    parser.add_argument("--work", type=Path, default=Path("build/model_profile"), help="ONNX files, profiles")
    parser.add_argument("--docs", type=Path, help="write the report here (e.g. docs/reports/model_profile.md)")
    parser.add_argument("--note", default="", help="a paragraph for the doc: how this run came about")
    parser.add_argument("--report-only", action="store_true", help="write the doc from --work; measure nothing")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    threads = [int(t) for t in args.threads.split(",")]
    try:
        logs = dict(item.split("=", 1) for item in args.log)
    except ValueError:
        print("model_profile: error: --log takes NAME=LOG, the model's name and its tuning log", file=sys.stderr)
        return 2
    args.work.mkdir(parents=True, exist_ok=True)
    results = args.work / "profiles.jsonl"
    try:
        if not args.report_only:
            run(models, threads, logs, args, results)
    except AnsorError as exc:
        print(f"model_profile: error: {exc}", file=sys.stderr)
        return 1
    done = read_profiles(results)
    profiles = [done[(model_name(m), t)] for t in threads for m in models if (model_name(m), t) in done]
    if args.docs:
        write_doc(args.docs, sys.argv[1:] if argv is None else argv, profiles, args.note, args.rewrites)
    return 0


def run(models: list[str], threads: list[int], logs: dict[str, str], args, results: Path) -> None:
    import iree.runtime as rt

    from ansor_bench.model_profile import profile_model
    from ansor_mlir import api
    from ansor_mlir.core.target import parse_target

    rt.flags.parse_flags(f"--task_topology_max_group_count={max(threads)}")
    for count in threads:
        for model in models:
            name = model_name(model)
            onnx_path = onnx_file(model, args.work)
            source = api.load_model(onnx_path)
            target = api.resolve_target(parse_target("llvm-cpu", threads=count))
            log = Path(logs[name]) if name in logs else None
            print(f"{name} at {count} thread(s){'' if log is None else f', tuned with {log}'}", flush=True)
            profile = profile_model(name, source, onnx_path, model_inputs(model, onnx_path), target, log,
                                    args.work / f"{name}_t{count}", args.iterations, args.rounds, args.ort_runs,
                                    args.min_round_s, args.rewrites)
            with results.open("a") as out:
                out.write(json.dumps(profile.to_json()) + "\n")
            print(model_markdown(profile), flush=True)


if __name__ == "__main__":
    sys.exit(main())

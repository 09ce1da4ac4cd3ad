"""Grow the cost model's dataset, TenSet-style: tasks of the suite's shape space and of the bundled networks,
random and evolved candidates of each, measured on this host.

Each pass tunes every source (a suite workload at one shape, or a whole
bundled network's tasks) twice, from logs it resumes: by random search up to
`--random` more trials per task, then by evolutionary search (its model
trained online on the task's own measurements) up to `--evolved` more. A
killed run loses nothing measured; the next run continues the pass it was
in. The output directory holds, beside the logs:
  host.json    the target the records were measured for (`Target` fields,
               the CPU IREE resolved, its features, and the machine),
  tasks.jsonl  every task as a one-dispatch module with its operator kind,
               so training and metrics rebuild tasks without the networks.
`--manifest` lists the directory's files in data/MANIFEST.json (each log
training the shipped model); run it once the growing is stopped.

    nice -n 10 python tools/grow_dataset.py --passes 4 --random 8 --evolved 8
    python tools/grow_dataset.py --manifest
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ansor_mlir.core.target import Target, detect_host
from ansor_mlir.core.task import Task
from ansor_mlir.database.log_file import read_records
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.target_resolution import resolve_target
from ansor_mlir.tuning.options import TuneOptions
from ansor_mlir.tuning.tuner import Tuner, task_module

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # ansor_bench sits at the repo root, not installed
from ansor_bench.datasets import DATA, MANIFEST, REPO, SHIPPED_MODEL, count_records, operator_kind, sha256_of  # noqa: E402
from ansor_bench.workloads import make_workload, suite_names, suite_shapes  # noqa: E402

NETWORKS = {
    "tiny_mlp": "examples/models/tiny.py:tiny_mlp",
    "tiny_cnn": "examples/models/tiny.py:tiny_cnn",
    "resnet18": "examples/models/resnet.py:resnet18",
    "mobilenet_v2": "examples/models/mobilenet_v2.py:mobilenet_v2",
    "bert": "examples/models/bert.py:bert_layer",
    "resnet50": "examples/models/resnet.py:resnet50",
}
POLICIES = ("random", "evolutionary")
# Suite workloads above this many FLOPs cost seconds per measurement; the dataset keeps to the shapes that time fast.
MAX_FLOPS = 4e9


@dataclass(frozen=True)
class Source:
    """What one tuner run covers: a suite workload (one task or a few) or a network's tasks."""

    name: str
    tasks: tuple[Task, ...]


def host_description(target: Target) -> dict:
    """What the records of this run were measured on: the target as the search saw it and the machine."""
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        lscpu = ""
    info = dict(line.split(":", 1) for line in lscpu.splitlines() if ":" in line)
    return {
        "fingerprint": target.fingerprint,
        "target": asdict(target),
        "machine": platform.machine(),
        "model_name": info.get("Model name", "").strip() or platform.processor(),
        "hypervisor": info.get("Hypervisor vendor", "").strip(),
        "cores": target.cores,
    }


def suite_sources(tuner: Tuner, kinds: list[str]) -> list[Source]:
    out = []
    for name in kinds:
        for shape in suite_shapes(name):
            workload = make_workload(name, shape)
            if workload.flops <= MAX_FLOPS:
                out.append(Source(workload.label, tuple(tuner.tunable_tasks(workload.mlir, workload.label))))
    return out


def network_sources(tuner: Tuner, names: list[str]) -> list[Source]:
    """Each network's tasks as `ansor-compile` tunes them: after the default program rewrites (channels-last
    convolutions; before them, the channels-first ones no user's tuning meets)."""
    from ansor_mlir.frontend.model_source import load_model
    from ansor_mlir.frontend.program_rewrites import DEFAULT_REWRITES, parse_rewrites, rewrite_program

    out = []
    for name in names:
        source = load_model(str(REPO / NETWORKS[name]), name=name)
        text = rewrite_program(source.text, parse_rewrites(DEFAULT_REWRITES), name).text
        out.append(Source(name, tuple(tuner.tunable_tasks(text, name))))
    return out


def unique_sources(sources: list[Source]) -> list[Source]:
    """Each task in the first source that has it (ResNet-18 and -50 share layers); sources left empty dropped."""
    seen: set[str] = set()
    out = []
    for source in sources:
        mine = tuple(t for t in source.tasks if t.key not in seen)
        seen |= {t.key for t in mine}
        if mine:
            out.append(Source(source.name, mine))
    return out


def write_tasks(sources: list[Source], path: Path) -> None:
    """Every task once, as the one-dispatch module it re-extracts from, with its source and operator kind."""
    known = {}
    if path.exists():
        known = {e["key"]: e for e in map(json.loads, path.read_text().splitlines()) if e}
    for source in sources:
        for task in source.tasks:
            known.setdefault(task.key, {"key": task.key, "name": task.name, "source": source.name,
                                        "kind": operator_kind(task), "flops": task.flops,
                                        "module": task_module(task)})
    path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in known.values()))


def log_path(out: Path, source: Source, policy: str) -> Path:
    return out / f"{source.name}.{policy}.jsonl"


def tune(source: Source, policy: str, trials: int, out: Path, target: Target, seed: int) -> None:
    options = TuneOptions(trials_per_task=trials, log=log_path(out, source, policy), seed=seed, policy=policy,
                          model="none", progress=False, build_workers=1, verify=0)
    Tuner(target, options).tune_tasks(list(source.tasks))


def grow(args: argparse.Namespace) -> None:
    target = resolve_target(detect_host())
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    host = {**host_description(target), "command": "python tools/grow_dataset.py " + " ".join(args.argv)}
    (out / "host.json").write_text(json.dumps(host, indent=1, sort_keys=True) + "\n")
    tuner = Tuner(target, TuneOptions(progress=False))
    sources = suite_sources(tuner, args.kinds or suite_names())
    sources += network_sources(tuner, args.networks)
    sources = unique_sources(sources)
    write_tasks(sources, out / "tasks.jsonl")
    tasks = sum(len(s.tasks) for s in sources)
    print(f"{len(sources)} sources, {tasks} tasks on {target.fingerprint}", flush=True)
    for npass in range(1, args.passes + 1):
        for source in sources:
            for policy, step in (("random", args.random), ("evolutionary", args.evolved)):
                if not step:
                    continue
                started = time.perf_counter()
                try:
                    tune(source, policy, step * npass, out, target, args.seed)
                except AnsorError as exc:  # one task IREE cannot build must not stop the dataset
                    print(f"pass {npass} {source.name} {policy}: {exc}", flush=True)
                    continue
                print(f"pass {npass} {source.name} {policy}: {time.perf_counter() - started:.0f}s", flush=True)


def update_manifest(out: Path, manifest_path: Path = MANIFEST) -> int:
    """List the dataset directory's files in the manifest (data/MANIFEST.json; its logs train the shipped model),
    replacing the directory's earlier entries."""
    data = manifest_path.parent
    manifest = json.loads(manifest_path.read_text())
    try:
        root = str(out.resolve().relative_to(data.resolve()))
    except ValueError:
        raise AnsorError(f"{out} is not under {data}: move the dataset there, then list it") from None
    host = json.loads((out / "host.json").read_text())
    kept = [e for e in manifest["files"] if not e["path"].startswith(root + "/")]
    where = (f"{host['model_name']} ({host['machine']}, {host['hypervisor'] or 'bare metal'} guest, "
             f"{host['cores']} cores), IREE CPU {host['target']['resolved_cpu']}, "
             f"{host['target']['vector_bytes'] * 8}-bit vectors, 1 runtime thread")
    date = datetime.date.today().isoformat()
    added = []
    for path in sorted(out.iterdir()):
        rel = str(path.resolve().relative_to(data.resolve()))
        if path.suffix == ".jsonl" and path.name != "tasks.jsonl":
            source, policy = path.name.removesuffix(".jsonl").rsplit(".", 1)
            what = (f"cost-model dataset log (record schema 3, fingerprint {host['fingerprint']}): {source}, "
                    f"{policy} search, measured on {where}")
            kind, trains = "dataset-log", [SHIPPED_MODEL]
        elif path.name == "tasks.jsonl":
            what = "the dataset's tasks: each a one-dispatch module, its source and operator kind"
            kind, trains = "dataset-tasks", []
        elif path.name == "host.json":
            what = f"the target and machine the dataset's records were measured on: {where}"
            kind, trains = "dataset-host", []
        else:
            continue
        records = count_records(path)
        added.append({"path": rel, "kind": kind, "what": what, "produced_by": f"{host['command']} ({date})",
                      "records": records, "sha256": sha256_of(path), "trains": trains})
    manifest["files"] = kept + added
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    logs = [e for e in added if e["kind"] == "dataset-log"]
    print(f"listed {len(added)} files of {root} in {manifest_path}: {sum(e['records'] for e in logs)} records")
    return 0


def summary(out: Path) -> None:
    total = 0
    for path in sorted(out.glob("*.jsonl")):
        if path.name != "tasks.jsonl":
            records = read_records(path)
            total += len(records)
    print(f"{total} records in {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DATA / "logs" / "dataset" / "xeon-avx512")
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--random", type=int, default=8, help="random trials per task added each pass")
    parser.add_argument("--evolved", type=int, default=8, help="evolutionary trials per task added each pass")
    parser.add_argument("--kinds", nargs="*", default=None, help="suite entries (default: all)")
    parser.add_argument("--networks", nargs="*", default=list(NETWORKS), choices=list(NETWORKS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--manifest", action="store_true", help="list the output directory in data/MANIFEST.json")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if args.manifest:
            return update_manifest(args.out)
        grow(args)
        summary(args.out)
    except AnsorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

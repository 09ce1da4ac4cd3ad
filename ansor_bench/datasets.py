"""The repository's data directory and its manifest.

`data/MANIFEST.json` lists every dataset file (paths relative to `data/`):
what it is, the command that produced it, its record count and sha256, and
the model files it trains. Retraining the shipped cost model reads the list
from here, so the model is rebuilt from exactly the logs it was built from,
and a log that changed on disk is refused instead of silently used.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ansor_mlir.core.target import Target
from ansor_mlir.core.task import Task
from ansor_mlir.database.log_file import read_records
from ansor_mlir.database.measure_record import Record
from ansor_mlir.database.queries import task_history
from ansor_mlir.errors import AnsorError
from ansor_mlir.model.feature_extractor import FeatureExtractor

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "data"
MANIFEST = DATA / "MANIFEST.json"
SHIPPED_MODEL = "ansor_mlir/data/cost_model.json"


@dataclass(frozen=True)
class DataFile:
    """One manifest entry."""

    path: str
    kind: str
    what: str
    produced_by: str
    records: int
    sha256: str
    trains: tuple[str, ...] = ()
    # The LLVM CPU (`--iree-llvmcpu-target-cpu`) the records were measured on, for logs whose records carry no
    # fingerprint (schema 2); "" when the records name it.
    cpu: str = ""


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def count_records(path: Path) -> int:
    """Records of a JSON-lines file: its non-blank lines (counted without parsing, so any schema version)."""
    return sum(1 for line in path.read_text().splitlines() if line.strip())


def load_manifest(manifest: Path = MANIFEST) -> tuple[DataFile, ...]:
    try:
        entries = json.loads(manifest.read_text())["files"]
        return tuple(DataFile(**{**e, "trains": tuple(e.get("trains", ()))}) for e in entries)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise AnsorError(f"{manifest}: not a readable data manifest ({exc}); restore it from git") from None


def problem(entry: DataFile, root: Path = DATA) -> str | None:
    """Why the file on disk does not match its manifest entry, or None when it does."""
    path = root / entry.path
    if not path.is_file():
        return f"{entry.path}: listed in the manifest but missing"
    if (digest := sha256_of(path)) != entry.sha256:
        return f"{entry.path}: sha256 {digest[:12]}... differs from the manifest's {entry.sha256[:12]}..."
    if (count := count_records(path)) != entry.records:
        return f"{entry.path}: {count} records, the manifest says {entry.records}"
    return None


def training_logs(model: str = SHIPPED_MODEL, manifest: Path = MANIFEST) -> list[Path]:
    """The verified logs the manifest says train `model` (a repository-relative path)."""
    return list(training_log_cpus(model, manifest))


def training_log_cpus(model: str = SHIPPED_MODEL, manifest: Path = MANIFEST) -> dict[Path, str]:
    """The verified logs the manifest says train `model`, each with the CPU its entry names ("" for none)."""
    root = manifest.parent
    entries = [e for e in load_manifest(manifest) if model in e.trains]
    if not entries:
        raise AnsorError(f"{manifest}: no file trains {model}; list its logs there or pass --logs")
    problems = [p for e in entries if (p := problem(e, root))]
    if problems:
        raise AnsorError(f"{manifest}: {'; '.join(problems)}; restore the file or update its entry")
    return {root / e.path: e.cpu for e in entries}


# ---- the cost model's samples ---------------------------------------------------------------------------------

# Where featurized logs and re-extracted tasks are kept between runs (each keyed by its inputs' digests).
CACHE = Path(os.environ.get("ANSOR_DATASET_CACHE", "/tmp/ansor_dataset_cache"))
TASKS_FILE = "tasks.jsonl"
# Changes whenever what a `TaskSamples` holds does (its kinds, its fields): cached samples of another are rebuilt.
SAMPLES_VERSION = 3


def operator_kind(task: Task) -> str:
    """A task's operator kind for held-out metrics, from its root's structure (IREE generalizes most named ops):
    `conv` (an input read through a window), `contraction` (multiply-accumulate over reductions, an input reused
    across a parallel loop), `reduction`,
    `elementwise`, with its parallel and reduction loop counts (`conv_4p3r`), so a convolution of the suite and
    one of a network are one kind."""
    root = task.root
    window = any(len(expr.dims()) > 1 for amap in root.indexing_maps[:-1] for expr in amap.results)
    name = root.name.removeprefix("linalg.")
    if window or "conv" in name:
        family = "conv"
    elif root.reduction_dims and ("matmul" in name or ({"arith.mulf", "arith.addf"} <= set(root.body_ops) and any(
            set(root.parallel_dims) - amap.dims() for amap in root.indexing_maps[:-1]))):
        family = "contraction"
    elif root.reduction_dims:
        family = "reduction"
    else:
        family = "elementwise"
    return f"{family}_{len(root.parallel_dims)}p{len(root.reduction_dims)}r"


@dataclass(frozen=True)
class TaskSamples:
    """One task's measured candidates on one CPU, featurized for that CPU."""

    host: str
    task_key: str
    name: str
    source: str
    kind: str
    features: np.ndarray
    times: np.ndarray  # seconds; inf for failures
    errors: tuple[str, ...]
    messages: tuple[str, ...]

    @property
    def unit(self) -> str:
        """The task across hosts: its source and name (held out together)."""
        return f"{self.source}/{self.name}"

    @property
    def ok(self) -> np.ndarray:
        return np.isfinite(self.times)


def _cached(key: dict, build: Callable[[], object]) -> object:
    """`build()`, kept on disk under a digest of `key` (a JSON-able description of everything it depends on)."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    path = CACHE / f"{key.get('what', 'item')}-{digest}.pkl"
    if path.is_file():
        try:
            return pickle.loads(path.read_bytes())
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, TypeError):
            pass
    value = build()
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(pickle.dumps(value))
    tmp.replace(path)
    return value


def dataset_tasks(directory: Path, target: Target) -> dict[str, tuple[Task, str]]:
    """The tasks a dataset directory lists (`tasks.jsonl`), re-extracted for `target`: key -> (task, source)."""
    from ansor_mlir.frontend.task_extraction import extract_tasks

    path = directory / TASKS_FILE
    if not path.is_file():
        return {}
    out: dict[str, tuple[Task, str]] = {}
    for entry in (json.loads(line) for line in path.read_text().splitlines() if line.strip()):
        def build(entry: dict = entry) -> list[Task]:
            return extract_tasks(entry["module"], target, entry["name"])

        tasks = _cached({"what": "tasks", "module": entry["module"], "target": target.to_json()}, build)
        for task in tasks:
            if task.key == entry["key"]:
                out[task.key] = (task, entry["source"])
    return out


def suite_tasks(target: Target, rewrite_sets: tuple[tuple[str, ...], ...]) -> dict[str, tuple[Task, str]]:
    """Every task of every suite workload (all bundled shapes) for `target`, as given and after each set of
    program rewrites: key -> (task, workload label)."""
    from ansor_bench.workloads import make_workload, suite_names, suite_shapes
    from ansor_mlir.database.training_data import tasks_by_module

    out: dict[str, tuple[Task, str]] = {}
    for name in suite_names():
        for shape in suite_shapes(name):
            workload = make_workload(name, shape)

            def build(workload=workload) -> list[Task]:
                return tasks_by_module({workload.label: workload.mlir}, target, rewrite_sets)[workload.label]

            key = {"what": "suite", "module": workload.mlir, "target": target.to_json(), "rewrites": rewrite_sets}
            tasks = _cached(key, build)
            for task in tasks:
                out.setdefault(task.key, (task, workload.label))
    return out


def measured_cpu(record: Record, log_cpu: str) -> str:
    """The LLVM CPU a record was measured on: its fingerprint's, else its log's manifest entry's ("" unknown).

    A fingerprint of an unresolved target names `host` (tools that tuned with `detect_host()` as is)."""
    cpu = record.fingerprint.split(":")[1] if record.fingerprint else ""
    return cpu if cpu and cpu != "host" else log_cpu


def measured_target(host: Target, cpu: str) -> Target:
    """The target a record was measured for: this host's key (records say `cpu=host`), the vector width and
    features IREE resolves `cpu` to (this host's own when ""), this host's caches.

    Features read the target (vector lanes, caches), so a log from an
    AVX-512 host featurized as this AVX2 host taught the model 8-lane
    programs that were 16-lane ones, and its micro-kernel sketches (other
    register shapes) did not replay onto this host's at all.
    """
    from ansor_mlir.frontend.target_resolution import resolve_cpu

    return host.resolved(resolve_cpu(host.backend, cpu or host.cpu, host.triple))


def _featurize(records: list[Record], task: Task, source: str, target: Target, cpu: str,
               extractor: FeatureExtractor) -> TaskSamples | None:
    from ansor_mlir.space.sketch_rules import generate_sketches

    sketches = generate_sketches(task, target)
    mine = [r for r in task_history(records, target.key, task.key, sketches) if r.candidate.sketch_index >= 0]
    if not mine:
        return None
    matrix = extractor.extract(task, {s.index: s for s in sketches}, [r.candidate for r in mine], target)
    times = np.array([r.result.median_s if r.ok else np.inf for r in mine], dtype=np.float64)
    return TaskSamples(cpu, task.key, task.name, source, operator_kind(task), matrix.values, times,
                       tuple(r.result.error.value for r in mine),
                       tuple(r.result.message[:200] for r in mine))


def load_samples(log_cpus: dict[Path, str], host: Target, extractor: FeatureExtractor) -> list[TaskSamples]:
    """Every task's samples in the logs, per CPU measured on (`measured_cpu`), each featurized for its CPU.

    A log beside a `tasks.jsonl` (a `tools/grow_dataset.py` directory) finds its tasks there; any other log
    among the suite workloads' tasks (as given and after the default program rewrites). Featurized logs are
    cached by their digest, the extractor and the CPU."""

    out: list[TaskSamples] = []
    index: dict[tuple, dict[str, tuple[Task, str]]] = {}
    for log, log_cpu in log_cpus.items():
        records = read_records(log)
        by_cpu: dict[str, list[Record]] = {}
        for record in records:
            by_cpu.setdefault(measured_cpu(record, log_cpu), []).append(record)
        for cpu, mine in sorted(by_cpu.items()):
            target = measured_target(host, cpu)
            where = "dataset" if (log.parent / TASKS_FILE).is_file() else "suite"
            rewrites = tuple(sorted({r.rewrites for r in mine}))
            if (where, cpu, rewrites) not in index:
                index[(where, cpu, rewrites)] = (dataset_tasks(log.parent, target) if where == "dataset"
                                                 else suite_tasks(target, rewrites))
            tasks = index[(where, cpu, rewrites)]

            def build(mine: list[Record] = mine, tasks=tasks, target: Target = target, cpu: str = cpu) -> list:
                keys = dict.fromkeys(r.task_key for r in mine)
                samples = [_featurize(mine, *tasks[k], target, cpu or target.resolved_cpu, extractor)
                           for k in keys if k in tasks]
                return [s for s in samples if s is not None]

            key = {"what": "samples", "version": SAMPLES_VERSION, "log": sha256_of(log), "cpu": cpu,
                   "target": target.to_json(), "extractor": extractor.name,
                   "extractor_version": extractor.version, "names": list(extractor.names)}
            out += _cached(key, build)
    return out

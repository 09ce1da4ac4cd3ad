"""The Python pipeline API, mirroring the `ansor-opt` passes one to one."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iree.compiler import ir

from ansor_mlir.codegen.transform_strategy import render_strategy, strategy_name
from ansor_mlir.codegen.tuning_spec import attach_configs, render_library, render_spec
from ansor_mlir.core.schedule import Family, Sketch
from ansor_mlir.core.target import Target, parse_target
from ansor_mlir.core.task import Task
from ansor_mlir.database.records import Record, best_records, read_records, upgrade_legacy
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.model_source import ModelSource, is_model_reference, load_model
from ansor_mlir.frontend.target_resolution import resolve_target as resolve_cpu_target
from ansor_mlir.frontend.task_extraction import extract_tasks as _extract_tasks
from ansor_mlir.frontend.task_extraction import validate_input
from ansor_mlir.mlir.iree_compiler import compile_to_phase, compile_vmfb, first_error_line
from ansor_mlir.mlir.iree_module import CompiledModel
from ansor_mlir.passes.ansor_passes import Toolkit
from ansor_mlir.passes.pipeline import AfterPass, PassInvocation, PipelineResult
from ansor_mlir.passes.pipeline import run_pipeline as _run_pipeline
from ansor_mlir.space.sketch_rules import generate_sketches as _generate_sketches
from ansor_mlir.tuning.callbacks import TuningCallback
from ansor_mlir.tuning.progress import ConsoleProgress
from ansor_mlir.tuning.task_result import TaskResult
from ansor_mlir.tuning.tuner import TuneOptions, Tuner

BUILD_HINT = "// Build the tuned program with: iree-compile THIS_FILE -o tuned.vmfb\n"


def read_source(source: str | Path | ModelSource | Any, name: str | None = None) -> tuple[str, str]:
    """(text, name) of a module given as MLIR text (`str`), a file (`Path`), or a model.

    Models (a `.onnx` path, `file.py:factory`, an `onnx.ModelProto`, a
    `(torch.nn.Module, example_inputs)` pair, a `ModelSource`) are imported by
    `load_model`; their text names the weights as parameters (see `compile`).
    """
    if isinstance(source, Path) and not is_model_reference(str(source)):
        try:
            return source.read_text(encoding="utf-8"), name or str(source)
        except (OSError, UnicodeDecodeError) as exc:
            raise AnsorError(f"cannot read {source}: {exc}") from None
    if isinstance(source, str) and not is_model_reference(source):
        return source, name or "<input>"
    model = load_model(source, name=name)
    return model.text, model.name


def resolve_target(target: str | Target) -> Target:
    """A target as IREE resolves it (its CPU's name, features, vector width and limits): records are keyed by it."""
    if isinstance(target, Target):
        return target if target.resolved_cpu else resolve_cpu_target(target)
    return resolve_cpu_target(parse_target(target))


def extract_tasks(
    module: str | Path, target: str | Target = "llvm-cpu", name: str | None = None
) -> list[Task]:
    """The unique, weighted tasks (dispatches) of a linalg module."""
    text, name = read_source(module, name)
    return _extract_tasks(text, resolve_target(target), name)


def generate_sketches(task: Task, target: str | Target = "llvm-cpu") -> list[Sketch]:
    """The sketches of a task; sketch zero is IREE's own configuration."""
    return _generate_sketches(task, resolve_target(target))


@dataclass(frozen=True)
class TuneResult:
    module: str
    tasks: list[TaskResult]
    log: Path


def tune(
    module: str | Path,
    target: str | Target = "llvm-cpu",
    trials: int = 32,
    log: str | Path = "ansor_tuning.jsonl",
    seed: int = 0,
    policy: str = "evolutionary",
    progress: bool = True,
    options: TuneOptions | None = None,
    name: str | None = None,
    callbacks: Sequence[TuningCallback] = (),
) -> TuneResult:
    """Tune every task of a module; returns the module with the best configurations attached.

    `callbacks` hear of the run's progress, beside the console's notes (and bar and table with `progress`).
    """
    text, name = read_source(module, name)
    tgt = resolve_target(target)
    opts = options or TuneOptions(trials=trials, log=Path(log), seed=seed, policy=policy, progress=progress)
    tuner = Tuner(tgt, opts, callbacks=[ConsoleProgress(progress=opts.progress), *callbacks])
    if opts.trials == 0:
        tuner.predict_tasks(tuner.tunable_tasks(text, name))
        return TuneResult(apply_best(text, opts.log, tgt, name), [], opts.log)
    results = tuner.tune_module(text, name)
    return TuneResult(apply_best(text, opts.log, tgt, name), results, opts.log)


def _best_for_target(log: str | Path, target: Target) -> dict[str, Record]:
    path = Path(log)
    if not path.exists():
        raise AnsorError(f"tuning log {path} does not exist: run --ansor-tune with log={path} first")
    records = read_records(path)
    best = best_records(records, target.key, target.fingerprint)
    if records and not best:
        others = sorted({r.fingerprint or r.target for r in records})
        raise AnsorError(f"tuning log {path} has no record for this machine, {target.fingerprint} (it has "
                         f"{', '.join(others)}): tune on this machine, or name the target the log was tuned for")
    return best


def apply_best(
    module: str | Path, log: str | Path, target: str | Target = "llvm-cpu", name: str | None = None
) -> str:
    """The module, lowered by IREE to dispatches, with the best recorded configuration on each.

    Plain `iree-compile` builds the result into the tuned program. Records for
    another target are never applied.
    """
    text, name = read_source(module, name)
    tgt = resolve_target(target)
    validate_input(text, name)
    best = _best_for_target(log, tgt)
    flow = compile_to_phase(text, tgt.compile_flags(), "flow", name)
    configs = {
        key: (record.root_index, record.config)
        for key, record in best.items()
        if not record.is_default and record.family is not Family.TRANSFORM
    }
    strategies = best_strategies(text, best, tgt, name) if any(
        r.family is Family.TRANSFORM for r in best.values()
    ) else {}
    tuned, _ = attach_configs(flow, configs, name, strategies)
    return BUILD_HINT + tuned


def best_strategies(
    text: str, best: dict[str, Record], target: Target, name: str
) -> dict[str, tuple[str, str]]:
    """(strategy name, text) per task whose best record is a transform strategy, rebuilt from the record's own
    trace (older records: from the sketch they name, upgraded against this version's sketches)."""
    out = {}
    for task in _extract_tasks(text, target, name):
        record = best.get(task.key)
        if record is None or record.family is not Family.TRANSFORM:
            continue
        if record.sketch is None:
            upgraded = upgrade_legacy([record], task.key, _generate_sketches(task, target))
            if not upgraded:
                raise AnsorError(
                    f"tuning log: task {task.name} record names transform sketch {record.candidate.sketch_index}, "
                    "which this version does not derive: retune with a fresh log"
                )
            record = upgraded[0]
        strategy = strategy_name(task, record.candidate)
        out[task.key] = (strategy, render_strategy(record.sketch, record.candidate, task, strategy))
    return out


def emit_transform_library(
    module: str | Path, log: str | Path, target: str | Target = "llvm-cpu", name: str | None = None
) -> str:
    """A transform library with the best strategy of every task tuned with the transform family.

    For ordinary IREE flows: `iree-compile IN.mlir --iree-codegen-transform-dialect-library=LIB`.
    Its `@__kernel_config` matches each dispatch function by its root op and
    shape and points it at its strategy.
    """
    text, name = read_source(module, name)
    tgt = resolve_target(target)
    best = _best_for_target(log, tgt)
    tasks = {t.key: t for t in _extract_tasks(text, tgt, name)}
    strategies = best_strategies(text, best, tgt, name)
    return render_library([(tasks[key], *strategies[key]) for key in sorted(strategies)])


def emit_tuning_spec(
    module: str | Path, log: str | Path, target: str | Target = "llvm-cpu", name: str | None = None
) -> str:
    """One tuning spec with the best configuration of every task of the module, transform strategies included.

    For ordinary IREE flows: `iree-compile IN.mlir --iree-codegen-tuning-spec-path=SPEC`, nothing else: a task
    whose best record is a transform strategy gets the strategy in the spec, which runs it on the dispatch.
    """
    text, name = read_source(module, name)
    tgt = resolve_target(target)
    tasks = _extract_tasks(text, tgt, name)
    best = _best_for_target(log, tgt)
    entries = [
        (task, best[task.key].config)
        for task in tasks
        if task.key in best and task.tunable and not best[task.key].is_default
        and best[task.key].family is not Family.TRANSFORM
    ]
    strategies = best_strategies(text, best, tgt, name)
    by_key = {task.key: task for task in tasks}
    return render_spec(entries, [(by_key[key], *strategies[key]) for key in sorted(strategies)])


# Whole models compile for longer and in more memory than one task's candidates.
MODEL_COMPILE_TIMEOUT_S = 1800.0
MODEL_COMPILE_MEMORY_BYTES = 16 * 1024**3


def compile(
    model: str | Path | ModelSource | Any,
    target: str | Target = "llvm-cpu",
    log: str | Path | None = None,
    example_inputs: Sequence[Any] | Any | None = None,
    *,
    name: str | None = None,
    embed_parameters: bool = True,
) -> CompiledModel:
    """The model built by IREE with the best recorded configuration of each task: a runnable module.

    Without `log`, IREE's own configurations (the untuned baseline, built from
    the same imported IR). The weights are embedded in the program
    (`--iree-parameter-import`), or with `embed_parameters=False` kept beside
    it and handed to the runtime as a parameter provider.
    """
    source = load_model(model, example_inputs, name=name)
    tgt = resolve_target(target)
    text = apply_best(source.text, log, tgt, source.name) if log is not None else source.text
    with tempfile.TemporaryDirectory(prefix="ansor-compile-") as tmp:
        flags = tgt.compile_flags()
        if source.parameters and embed_parameters:
            flags = [*flags, *source.import_flags(source.write_parameters(Path(tmp) / "weights.irpa"))]
        out = Path(tmp) / "model.vmfb"
        result = compile_vmfb(text, flags, out, timeout_s=MODEL_COMPILE_TIMEOUT_S,
                              memory_bytes=MODEL_COMPILE_MEMORY_BYTES)
        if not result.ok:
            raise AnsorError(f"{source.name}: IREE could not compile it: {first_error_line(result.stderr)}")
        vmfb = out.read_bytes()
    kept = b"" if embed_parameters else source.parameters
    return CompiledModel(vmfb, source.entry, tgt.runtime_device(), kept, source.scope)


def run_pipeline(
    module: ir.Module | str | Path,
    pipeline: str | Sequence[str | PassInvocation],
    name: str | None = None,
    after_pass: AfterPass | None = None,
) -> PipelineResult:
    """Run `ansor-opt` passes on a module object (or MLIR text, or a file) and get module objects back.

    `pipeline` is a `--pass-pipeline` string or a list of passes (`"ansor-tune{trials=8}"`);
    `result.module` is the last pass's output and `result.after` every pass's output, as IR objects.
    """
    toolkit = Toolkit(tune=tune, apply_best=apply_best, emit_tuning_spec=emit_tuning_spec,
                      emit_transform_library=emit_transform_library)
    return _run_pipeline(module, pipeline, toolkit, name, after_pass)

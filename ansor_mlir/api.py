"""The Python API: the same operations and option names as `ansor-opt` and `ansor-compile`.

Arguments are checked before anything is read, compiled or written: a wrong
one raises `AnsorError` with the message the command line gives for the same
option (the options and their domains are declared once, in `tuning.options`).
A `Path` is always a file; a `str` is a file only when it looks like one (no
newline, and it names an existing file or ends in `.mlir`/`.onnx`, or is
`file.py:factory`), otherwise it is MLIR text.
"""

from __future__ import annotations

import dataclasses
import stat
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iree.compiler import ir

from ansor_mlir.codegen.tuning_spec import render_spec
from ansor_mlir.core.schedule import Sketch
from ansor_mlir.core.target import Target, parse_target
from ansor_mlir.core.task import Task
from ansor_mlir.database.records import Record
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend import model_source
from ansor_mlir.frontend.model_source import ModelSource, is_model_object, is_model_reference
from ansor_mlir.frontend.program_rewrites import DEFAULT_REWRITES, RewrittenProgram, parse_rewrites, rewrite_program
from ansor_mlir.frontend.target_resolution import resolve_target as resolve_cpu_target
from ansor_mlir.frontend.task_extraction import extract_tasks as _extract_tasks
from ansor_mlir.frontend.torch_import import is_factory_reference
from ansor_mlir.mlir.context import MAX_TEXT_CHARS
from ansor_mlir.mlir.iree_compiler import compile_vmfb, first_error_line, tuning_spec_flags
from ansor_mlir.mlir.iree_module import CompiledModel
from ansor_mlir.passes.ansor_passes import Toolkit
from ansor_mlir.passes.pass_options import PASSES
from ansor_mlir.passes.pipeline import AfterPass, PassInvocation, PipelineResult
from ansor_mlir.passes.pipeline import run_pipeline as _run_pipeline
from ansor_mlir.space.sketch_rules import generate_sketches as _generate_sketches
from ansor_mlir.tuning.apply import (
    as_the_spec_applies,  # noqa: F401 (tests reach it through the API module)
    for_ordinary_flows,
    transform_library,
    tuned_module,
    tuning_spec,
)
from ansor_mlir.tuning.batch_export import ExportSummary
from ansor_mlir.tuning.batch_export import export_batch as _export_batch
from ansor_mlir.tuning.batch_export import import_results as _import_results
from ansor_mlir.tuning.callbacks import TuningCallback
from ansor_mlir.tuning.device_choice import alternatives, build_target
from ansor_mlir.tuning.options import (
    CPU,
    KEYWORDS,
    REWRITES_OPTION,
    SEED,
    STDOUT_LOG,
    THREADS,
    TUNE_OPTIONS,
    TuneOptions,
    check_tune_options,
    check_value,
    invalid,
    takes_options,
    tune_cli_option,
)
from ansor_mlir.tuning.program_choice import chosen_text, recorded_choice, records_target
from ansor_mlir.tuning.program_tuning import TuneResult, tune_program
from ansor_mlir.tuning.task_result import TaskResult
from ansor_mlir.tuning.verification import UserProgram

__all__ = [
    "AnsorError", "CompiledModel", "ModelSource", "Task", "TaskResult", "TuneOptions", "TuneResult", "apply_best",
    "compile",
    "emit_transform_library", "emit_tuning_spec", "export_batch", "extract_tasks", "generate_sketches",
    "import_results", "load_model", "resolve_target", "run_pipeline", "tune",
]
# Tests reach the tuned module of a rewritten program through the API module.
_with_best = tuned_module

# Suffixes that make a `str` a file name rather than MLIR text.
PATH_SUFFIXES = (".mlir", ".onnx")
# Longest `str` considered as a file name (longer ones are text).
MAX_PATH_CHARS = 4096
# Whole models compile for longer and in more memory than one task's candidates.
MODEL_COMPILE_TIMEOUT_S = 1800.0
MODEL_COMPILE_MEMORY_BYTES = 16 * 1024**3
TARGET_KEYWORDS = (CPU, THREADS, REWRITES_OPTION)


# ---- argument checks ---------------------------------------------------------------------------------------


def check_option(function: str, name: str, value: object, pass_name: str = "ansor-tune",
                 option_name: str | None = None) -> object:
    """`value` checked against a pass option's domain, as `ansor-opt` checks the option's text."""
    option = PASSES[pass_name].option(option_name or name)
    return check_value(function, option, value, name)


def check_type(function: str, name: str, value: object, types: type | tuple[type, ...], expected: str) -> None:
    allowed = types if isinstance(types, tuple) else (types,)
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        raise invalid(function, name, value, f"expected {expected}")


def check_target(function: str, target: object) -> None:
    if not isinstance(target, (str, Target)):
        raise invalid(function, "target", target, "expected a backend name (llvm-cpu) or a Target")
    if isinstance(target, str):
        check_option(function, "target", target)


def check_callbacks(function: str, callbacks: object) -> None:
    events = [name for name in vars(TuningCallback) if name.startswith("on_")]
    if not isinstance(callbacks, Sequence) or isinstance(callbacks, (str, bytes)):
        raise invalid(function, "callbacks", callbacks, "expected a list of TuningCallback objects")
    for callback in callbacks:
        if not all(callable(getattr(callback, event, None)) for event in events):
            raise invalid(function, "callbacks", callback, f"not a TuningCallback (it needs {', '.join(events)})")


def check_name(function: str, name: object) -> None:
    if name is not None and not isinstance(name, str):
        raise invalid(function, "name", name, "expected a str or None")


def target_of(function: str, target: object, given: dict[str, Any]) -> Target:
    """The target a call names (`target` with its `cpu=` and `threads=`), as IREE resolves it."""
    check_target(function, target)
    cpu, threads = given.get("cpu"), given.get("threads")
    if isinstance(target, Target):
        if cpu is not None and cpu != target.cpu:
            raise invalid(function, "cpu", cpu, f"the Target given names its CPU ({target.cpu}): give cpu= with a "
                                                "target name (target=\"llvm-cpu\"), or no cpu=")
        if threads is not None:
            target = dataclasses.replace(target, threads=threads)
        return target if target.resolved_cpu else resolve_cpu_target(target)
    return resolve_cpu_target(parse_target(str(target), threads=threads or 1, cpu=cpu or "host"))


def as_source(source: object) -> object:
    """A `str` that looks like a file name becomes a `Path`; a `Path` stays one; anything else is as given."""
    if isinstance(source, str) and _names_a_file(source):
        return source if is_factory_reference(source) else Path(source)
    return source


def _names_a_file(text: str) -> bool:
    if not text or len(text) > MAX_PATH_CHARS or "\n" in text or "\0" in text:
        return False
    if is_factory_reference(text) or text.lower().endswith(PATH_SUFFIXES):
        return True
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def _read_file(path: Path, name: str | None) -> tuple[str, str]:
    """A `.mlir` file's text; refuses what is not a regular file (a FIFO would hang) or is too large."""
    what = name or str(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise AnsorError(f"{what}: no such file") from None
    except (OSError, ValueError) as exc:
        raise AnsorError(f"{what}: cannot read: {exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise AnsorError(f"{what}: not a regular file: give a .mlir or .onnx file, or MLIR text")
    if info.st_size > 4 * MAX_TEXT_CHARS:
        raise AnsorError(f"{what}: {info.st_size} bytes, more MLIR than this tool parses")
    try:
        return path.read_text(encoding="utf-8"), what
    except (OSError, UnicodeDecodeError) as exc:
        raise AnsorError(f"{what}: cannot read: {exc}") from None


def read_source(source: str | Path | ModelSource | Any, name: str | None = None) -> tuple[str, str]:
    """(text, name) of a module given as MLIR text (`str`), a file (`Path`, or a `str` naming one), or a model."""
    program = read_program(source, name)
    return program.text, program.name


def read_program(source: str | Path | ModelSource | Any, name: str | None = None) -> UserProgram:
    """The program of a module given as MLIR text (`str`), a file (`Path`, or a `str` naming one), or a model.

    Models (a `.onnx` path, `file.py:factory`, an `onnx.ModelProto`, a
    `(torch.nn.Module, example_inputs)` pair, a `ModelSource`) are imported by
    `load_model`; their text names the weights as parameters (see `compile`).
    """
    check_name("ansor_mlir", name)
    if isinstance(source, UserProgram):
        return source
    source = as_source(source)
    if isinstance(source, Path) and not is_model_reference(str(source)):
        return UserProgram(*_read_file(source, name))
    if isinstance(source, str) and not is_model_reference(source):
        return UserProgram(source, name or "<input>")
    if source is None or isinstance(source, (bytes, int, float, bool, list, dict, set)):
        raise AnsorError(f"cannot read a module from a {type(source).__name__}: give MLIR text, a .mlir/.onnx "
                         "path, file.py:factory, an onnx.ModelProto or a torch.nn.Module with example inputs")
    model = model_source.load_model(source, name=name)
    return UserProgram(model.text, model.name, model.parameters, model.scope)


def rewritten(function: str, text: str, name: str, rewrites: str) -> RewrittenProgram:
    """The program `function` works on: `text` after the program rewrites `rewrites` names (`none`: as given)."""
    check_option(function, "rewrites", rewrites)
    return rewrite_program(text, parse_rewrites(rewrites), name)


# ---- the API -------------------------------------------------------------------------------------------------


def load_model(model: Any, example_inputs: Sequence[Any] | Any | None = None, *, name: str | None = None,
               ) -> ModelSource:
    """Import a model to linalg-on-tensors MLIR, its weights kept out of the text.

    Parameters
    ----------
    model : str, Path, onnx.ModelProto, torch.nn.Module, tuple or ModelSource
        A `.onnx` or `.mlir` file, `file.py:factory` (a function returning `(module, example_inputs)`), MLIR
        text, an ONNX model, a PyTorch module (with `example_inputs`, or as the pair), or a `ModelSource`
        (returned as it is).
    example_inputs : sequence of tensors, optional
        What a PyTorch module is called with.
    name : str, optional
        The name messages give the model.

    Returns
    -------
    ModelSource
        `text` (the MLIR), `entry` (the function to call), `parameters` (the weights as an `.irpa` archive,
        empty when they are inline) and `scope` (the parameter scope the text names, `model`).
    """
    check_name("load_model", name)
    return model_source.load_model(as_source(model), example_inputs, name=name)


@takes_options(*TARGET_KEYWORDS)
def resolve_target(target: str | Target = "llvm-cpu", **given: Any) -> Target:
    """A target as IREE resolves it (its CPU's name, features, vector width and limits): records are keyed by it.

    Parameters
    ----------
    target : str or Target, default 'llvm-cpu'
        `llvm-cpu` (this host), `ARCH:CPU` (`aarch64:neoverse-v1`), `cuda:sm_80`, or a `Target`.
    {options}

    Returns
    -------
    Target
    """
    return target_of("resolve_target", target, given)


@takes_options(*TARGET_KEYWORDS)
def extract_tasks(module: str | Path | Any, target: str | Target = "llvm-cpu", name: str | None = None,
                  **given: Any) -> list[Task]:
    """The unique, weighted tasks (IREE's dispatches) of a program, after its program rewrites.

    Parameters
    ----------
    module : str, Path or model
        MLIR text, a `.mlir`/`.onnx` file, `file.py:factory`, or a model object (as `load_model` takes).
    target : str or Target, default 'llvm-cpu'
        What IREE compiles for.
    name : str, optional
        The name messages give the program.
    {options}

    Returns
    -------
    list of Task
        Each with `name`, `root` (its root op, loop extents), `flops` and `weight` (calls per program run).
    """
    tgt = target_of("extract_tasks", target, given)
    text, name = read_source(module, name)
    return _extract_tasks(rewritten("extract_tasks", text, name, given.get("rewrites", DEFAULT_REWRITES)).text, tgt,
                          name)


@takes_options(CPU, THREADS)
def generate_sketches(task: Task, target: str | Target = "llvm-cpu", **given: Any) -> list[Sketch]:
    """The sketches of a task (schedule traces with open decisions); sketch zero is IREE's own configuration.

    Parameters
    ----------
    task : Task
        One of `extract_tasks`' tasks.
    target : str or Target, default 'llvm-cpu'
        What IREE compiles for.
    {options}

    Returns
    -------
    list of Sketch
    """
    check_type("generate_sketches", "task", task, Task, "a Task (from extract_tasks)")
    return _generate_sketches(task, target_of("generate_sketches", target, given))


@takes_options(CPU, THREADS, REWRITES_OPTION, *TUNE_OPTIONS)
def tune(module: str | Path | Any, target: str | Target = "llvm-cpu", *, name: str | None = None,
         callbacks: Sequence[TuningCallback] = (), options: TuneOptions | None = None, **given: Any) -> TuneResult:
    """Tune every task of a program; the program with the best configurations attached.

    Each measurement is appended to the log as it completes: a run stopped midway resumes where it stopped
    when called again with the same log. Options are keywords with the command line's names (`trials=64`,
    `time_budget="30m"`, `threads=2`); a `TuneOptions` may be given instead, but not beside them.

    Parameters
    ----------
    module : str, Path or model
        MLIR text, a `.mlir`/`.onnx` file, `file.py:factory`, or a model object (as `load_model` takes).
    target : str or Target, default 'llvm-cpu'
        What IREE compiles for: `llvm-cpu` (this host), `ARCH:CPU` (tuned by the cost model, verified under
        qemu), `cuda:sm_80`, or a `Target`.
    {options}
    name : str, optional
        The name messages give the program.
    callbacks : sequence of TuningCallback, default ()
        Listeners of the run (notes, measurements, rounds), beside the console's progress.
    options : TuneOptions, optional
        All of the search options at once, instead of their keywords.

    Returns
    -------
    TuneResult
        `module` (IREE's flow-level module with the best configurations: `iree-compile` builds it),
        `tasks` (each task's result), `log`, `device` (the runtime device it runs fastest on),
        `device_choice`, `rewrite_check` and `one_thread` (the one-thread phase's results).
    """
    searched = sorted(key for key in given if key in KEYWORDS)
    if options is not None:
        if searched:
            raise AnsorError(f"tune: options= and {searched[0]}= both given: give every option as a keyword "
                             f"({searched[0]}=...), or set it in the options (dataclasses.replace(options, "
                             f"{searched[0]}=...))")
        opts = check_tune_options("tune", options)
    else:
        opts = TuneOptions(**{key: given[key] for key in searched})
    check_callbacks("tune", callbacks)
    check_name("tune", name)
    tgt = target_of("tune", target, given)
    program = read_program(module, name)
    return tune_program(program, tgt, opts, given.get("rewrites", DEFAULT_REWRITES), callbacks)


@takes_options(*TARGET_KEYWORDS)
def apply_best(module: str | Path | Any, log: str | Path, target: str | Target = "llvm-cpu", name: str | None = None,
               **given: Any) -> str:
    """The program after its rewrites, lowered by IREE to dispatches, with the best recorded configuration on each.

    Plain `iree-compile` builds the result into the tuned program. Records for another target are never
    applied.

    Parameters
    ----------
    module : str, Path or model
        The program as it was tuned (MLIR text, a file, or a model).
    log : str or Path
        The tuning log.
    target : str or Target, default 'llvm-cpu'
        The target it was tuned for.
    name : str, optional
        The name messages give the program.
    {options}

    Returns
    -------
    str
        IREE's flow-level module, as MLIR text.
    """
    tgt = target_of("apply_best", target, given)
    check_option("apply_best", "log", log, "ansor-apply-best")
    text, name = read_source(module, name)
    changed = rewritten("apply_best", text, name, given.get("rewrites", DEFAULT_REWRITES))
    choice = recorded_choice(log, text, name, changed, tgt)
    return tuned_module(chosen_text(text, changed, choice), name, log, records_target(tgt, choice))


@takes_options(*TARGET_KEYWORDS)
def emit_transform_library(module: str | Path | Any, log: str | Path, target: str | Target = "llvm-cpu",
                           name: str | None = None, **given: Any) -> str:
    """A transform library with the best strategy of every task tuned with the transform family.

    For ordinary IREE flows: `iree-compile IN.mlir --iree-codegen-transform-dialect-library=LIB`. Its
    `@__kernel_config` matches each dispatch function by its root op and shape and points it at its strategy.

    Parameters
    ----------
    module : str, Path or model
        The program as it was tuned.
    log : str or Path
        The tuning log.
    target : str or Target, default 'llvm-cpu'
        The target it was tuned for.
    name : str, optional
        The name messages give the program.
    {options}

    Returns
    -------
    str
        The library, as MLIR text.
    """
    tgt = target_of("emit_transform_library", target, given)
    check_option("emit_transform_library", "log", log, "ansor-emit-transform-library")
    text, name = read_source(module, name)
    rewrites = given.get("rewrites", DEFAULT_REWRITES)
    text, applied = for_ordinary_flows(text, name, rewrites, "transform library", log, tgt)
    return transform_library(text, name, log, tgt, applied)


@takes_options(*TARGET_KEYWORDS)
def emit_tuning_spec(module: str | Path | Any, log: str | Path, target: str | Target = "llvm-cpu",
                     name: str | None = None, **given: Any) -> str:
    """One tuning spec with the best configuration of every task of the program, transform strategies included.

    For ordinary IREE flows: `iree-compile IN.mlir --iree-codegen-tuning-spec-path=SPEC`, nothing else. Where a
    program rewrite changes the program, the spec matches the rewritten program's dispatches: compile that
    program (`ansor-opt IN --ansor-rewrite -o REWRITTEN.mlir`) with it, and a warning says so.

    Parameters
    ----------
    module : str, Path or model
        The program as it was tuned.
    log : str or Path
        The tuning log.
    target : str or Target, default 'llvm-cpu'
        The target it was tuned for.
    name : str, optional
        The name messages give the program.
    {options}

    Returns
    -------
    str
        The spec, as MLIR text (one that configures nothing, with a warning, when every task's best is IREE's
        default).
    """
    tgt = target_of("emit_tuning_spec", target, given)
    check_option("emit_tuning_spec", "log", log, "ansor-emit-tuning-spec")
    text, name = read_source(module, name)
    text, applied = for_ordinary_flows(text, name, given.get("rewrites", DEFAULT_REWRITES), "tuning spec", log, tgt)
    spec = tuning_spec(text, name, log, applied)
    if spec is None:
        warnings.warn(f"{name}: the tuning spec configures nothing: the log's best for every task of this program is "
                      "IREE's default (no candidate measured faster, or none faster in the whole program)",
                      stacklevel=3)
        return render_spec([])
    return spec


@takes_options(*TARGET_KEYWORDS)
def compile(
    model: str | Path | Any,
    target: str | Target = "llvm-cpu",
    log: str | Path | None = None,
    example_inputs: Sequence[Any] | Any | None = None,
    *,
    name: str | None = None,
    embed_parameters: bool = True,
    device: str | None = None,
    **given: Any,
) -> CompiledModel:
    """The model built by IREE with the best recorded configuration of each task: a runnable module.

    Without `log`, IREE's own configurations (the untuned baseline, built from the same imported IR after the
    same program rewrites), with ansor-mlir's codegen flags as every build here. With it, the same build plus a
    tuning spec carrying the records (`--iree-codegen-tuning-spec-path`), so a task whose best is IREE's default
    is built exactly as the baseline builds it.

    Parameters
    ----------
    model : str, Path or model
        A `.onnx`/`.mlir` file, `file.py:factory`, MLIR text or a model object (as `load_model` takes).
    target : str or Target, default 'llvm-cpu'
        What IREE compiles for.
    log : str or Path, optional
        The tuning log whose records are applied (none: IREE's default build).
    example_inputs : sequence of tensors, optional
        What a PyTorch module is called with.
    name : str, optional
        The name messages give the model.
    embed_parameters : bool, default True
        Embed the weights in the program (`--iree-parameter-import`); False keeps them beside it, handed to the
        runtime as a parameter provider (`CompiledModel.parameters`).
    device : str, optional
        The runtime device it runs on: the one the log's device choice recorded, else the target's
        (`local-sync` on one thread, `local-task` at threads > 1).
    {options}

    Returns
    -------
    CompiledModel
        Callable on numpy arrays; `vmfb` (the program's bytes), `function`, `device`, and `save(path)`. A
        program built for `local-task` takes IREE's wait and signal fences after its inputs, which the call
        passes itself.
    """
    tgt = target_of("compile", target, given)
    if log is not None:
        check_option("compile", "log", log, "ansor-apply-best")
    check_type("compile", "embed_parameters", embed_parameters, bool, "True or False")
    check_name("compile", name)
    source = model_source.load_model(as_source(model), example_inputs, name=name)
    changed = rewritten("compile", source.text, source.name, given.get("rewrites", DEFAULT_REWRITES))
    choice = recorded_choice(log, source.text, source.name, changed, tgt)
    devices = tuple(dict.fromkeys((tgt.runtime_device(), *alternatives(tgt))))
    runtime = device or (choice.device if choice is not None and choice.device in devices else tgt.runtime_device())
    if runtime not in devices:
        raise invalid("compile", "device", device, f"expected {' or '.join(devices)} for target {tgt.key}")
    text = chosen_text(source.text, changed, choice)
    # The recorded device's records (the one-thread search's on one thread), unless `device` overrides it.
    applied = records_target(tgt, choice) if choice is not None and runtime == choice.device else tgt
    spec = tuning_spec(text, source.name, log, applied) if log is not None else None
    built_for = build_target(tgt, runtime)  # on one thread: no fences (`tuning.device_choice`)
    vmfb, why = _build_model(source, text, built_for, spec, embed_parameters)
    if vmfb is None and spec is not None:
        warnings.warn(f"{source.name}: IREE could not build the model with the log's tuning spec ({why}); built "
                      "IREE's default instead: emit the spec (ansor-opt --ansor-emit-tuning-spec) to find the entry "
                      "it rejects, or tune again (whole-program checks reject a candidate whose spec fails)",
                      stacklevel=3)
        vmfb, why = _build_model(source, text, built_for, None, embed_parameters)
    if vmfb is None:
        raise AnsorError(f"{source.name}: IREE could not compile it: {why}")
    kept = b"" if embed_parameters else source.parameters
    return CompiledModel(vmfb, source.entry, runtime, kept, source.scope)


def _build_model(source: ModelSource, text: str, target: Target, spec: str | None, embed_parameters: bool,
                 ) -> tuple[bytes | None, str]:
    """The model's `.vmfb` built from `text` (with `spec`, a tuning spec), or None and IREE's first error."""
    with tempfile.TemporaryDirectory(prefix="ansor-compile-") as tmp:
        flags = target.compile_flags()
        if spec is not None:
            (Path(tmp) / "spec.mlir").write_text(spec)
            flags = [*flags, *tuning_spec_flags(Path(tmp) / "spec.mlir")]
        if source.parameters and embed_parameters:
            flags = [*flags, *source.import_flags(source.write_parameters(Path(tmp) / "weights.irpa"))]
        out = Path(tmp) / "model.vmfb"
        result = compile_vmfb(text, flags, out, timeout_s=MODEL_COMPILE_TIMEOUT_S,
                              memory_bytes=MODEL_COMPILE_MEMORY_BYTES)
        if not result.ok:
            return None, first_error_line(result.stderr)
        return out.read_bytes(), ""


def run_pipeline(
    module: ir.Module | str | Path | Any,
    pipeline: str | Sequence[str | PassInvocation],
    name: str | None = None,
    after_pass: AfterPass | None = None,
    parameters: bytes = b"",
) -> PipelineResult:
    """Run `ansor-opt` passes on a module object (or MLIR text, or a file, or a model) and get module objects back.

    Parameters
    ----------
    module : ir.Module, str, Path or model
        The input: a module object (the passes' outputs stay in its context), MLIR text, a file or a model.
    pipeline : str or sequence of str
        A `--pass-pipeline` string (`builtin.module(ansor-extract-tasks, ansor-tune{trials=8})`) or a list of
        passes (`"ansor-tune{trials=8}"`).
    name : str, optional
        The name messages give the input.
    after_pass : callable, optional
        Called as `after_pass(number, invocation, module)` after each pass.
    parameters : bytes, optional
        The `.irpa` archive of the weights a program reads (`#flow.parameter.named<"model"::...>`), which
        `ansor-tune`'s whole-program checks run it with. A model brings its own.

    Returns
    -------
    PipelineResult
        `module` (the last pass's output) and `after` (every pass's invocation and output), as IR objects.
    """
    if not isinstance(pipeline, str) and not (
        isinstance(pipeline, Sequence) and all(isinstance(p, (str, PassInvocation)) for p in pipeline)
    ):
        raise invalid("run_pipeline", "pipeline", pipeline, "expected a --pass-pipeline string or a list of passes")
    if not isinstance(module, (ir.Module, str, Path)) and not is_model_object(module):
        raise invalid("run_pipeline", "module", module, "expected an ir.Module, MLIR text, a file or a model")
    check_name("run_pipeline", name)
    module = as_source(module) if isinstance(module, str) else module
    toolkit = Toolkit(tune=tune, apply_best=apply_best, emit_tuning_spec=emit_tuning_spec,
                      emit_transform_library=emit_transform_library)
    if not isinstance(parameters, bytes):
        raise invalid("run_pipeline", "parameters", parameters, "expected the bytes of an .irpa archive")
    return _run_pipeline(module, pipeline, toolkit, name, after_pass, parameters)


@takes_options(*TARGET_KEYWORDS)
def export_batch(
    module: str | Path | Any, path: str | Path, target: str | Target = "llvm-cpu", *, candidates: int = 8,
    log: str | Path = STDOUT_LOG, seed: int = 0, name: str | None = None, **given: Any,
) -> ExportSummary:
    """A batch for a machine reached only by copying files: per task up to `candidates` new candidates (ranked
    by the cost model, taught by `log`) and IREE's default, built for `target`, with inputs and references.

    Measure it there with `python -m ansor_mlir.measure.offline_runner BATCH RESULTS` (IREE's runtime and
    numpy only), then `import_results(BATCH, RESULTS, log)`; export again for the next round.

    Parameters
    ----------
    module : str, Path or model
        The program to tune.
    path : str or Path
        The batch to write: a `.zip` file or a new directory.
    target : str or Target, default 'llvm-cpu'
        The machine it is measured on.
    candidates : int, default 8
        New candidates per task.
    log : str or Path, default 'ansor_tuning.jsonl'
        The tuning log that teaches the cost model (and that `import_results` appends to).
    seed : int, default 0
        Random seed.
    name : str, optional
        The name messages give the program.
    {options}

    Returns
    -------
    ExportSummary
        `path`, `programs`, `failed` (candidates that did not build) and `tasks`.
    """
    tgt = target_of("export_batch", target, given)
    candidates = check_value("export_batch", tune_cli_option("batch-size"), candidates, "candidates")
    log = check_option("export_batch", "log", log)
    seed = check_value("export_batch", SEED, seed, "seed")
    if not isinstance(path, (str, Path)) or not str(path):
        raise invalid("export_batch", "path", path, "expected a .zip file or a directory name")
    text, name = read_source(module, name)
    changed = rewritten("export_batch", text, name, given.get("rewrites", DEFAULT_REWRITES))
    options = TuneOptions(log=log, seed=seed, batch_size=candidates, progress=False, rewrites=changed.names)
    return _export_batch(changed.text, name, tgt, options, Path(path))


def import_results(batch: str | Path, results: str | Path, log: str | Path = STDOUT_LOG) -> list[Record]:
    """Append a batch's measurements (the offline runner's RESULTS file) to the tuning log as records.

    Parameters
    ----------
    batch : str or Path
        The batch `export_batch` wrote.
    results : str or Path
        What the offline runner measured of it.
    log : str or Path, default 'ansor_tuning.jsonl'
        The tuning log to append to.

    Returns
    -------
    list of Record
        The records appended.
    """
    log = check_option("import_results", "log", log)
    for label, value in (("batch", batch), ("results", results)):
        if not isinstance(value, (str, Path)) or not Path(value).exists():
            raise invalid("import_results", label, value, "no such file or directory")
    return _import_results(Path(batch), Path(results), Path(log))


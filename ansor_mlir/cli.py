"""`ansor-opt`, an mlir-opt style driver for the ansor passes, and `ansor-compile`, a model to a tuned `.vmfb`.

    ansor-opt IN.mlir --ansor-extract-tasks --ansor-generate-sketches
    ansor-opt IN.mlir --pass-pipeline="builtin.module(ansor-extract-tasks, ansor-generate-sketches)"
    ansor-opt IN.mlir --ansor-tune="trials=32" -o OUT.mlir     # log: OUT.jsonl
    ansor-opt BAD.mlir --split-input-file --verify-diagnostics --ansor-extract-tasks
    cat IN.mlir | ansor-opt                       # no pass: parse, verify, print
    ansor-compile model.onnx --trials 64 -o tuned.vmfb   # log: tuned.jsonl

Both take the options of `tuning.options`, as pass options and as flags. A model input's weights go beside
the output (`-o OUT.mlir`: `OUT.irpa`); the output says so in a comment, and the console prints how to build
and run what was written. User errors print one `PROG: error: ...` line and exit 1, no traceback. Ctrl-C
(SIGINT) and SIGTERM stop a run cleanly: every finished measurement is already in the log; the message says
how to resume, and the exit status is the shell's for the signal (130, 143).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from iree.compiler import ir
from iree.compiler import version as iree_version

from ansor_mlir import api
from ansor_mlir.core.target import Target, parse_target
from ansor_mlir.database.records import FORMAT_VERSION, producer_versions
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.model_source import ModelSource, is_model_reference, reads_parameters
from ansor_mlir.mlir.iree_compiler import flow_level_flags, tuning_spec_flags, winograd_flags
from ansor_mlir.mlir.vm_invoke import module_is_async
from ansor_mlir.passes.diagnostics import Diagnostic, LocatedError, expectations, verify
from ansor_mlir.passes.pass_options import PASSES, PassInvocation, parse_options, parse_pipeline, passes_help
from ansor_mlir.passes.source import (
    SPLIT_MARKER,
    Chunk,
    join_outputs,
    module_line,
    new_context,
    parameters_path,
    print_module,
    read_model,
    read_module,
    split_input,
)
from ansor_mlir.run_commands import (
    Runnable,
    build_command,
    command,
    entry_of,
    how_to_call,
    run_command,
)
from ansor_mlir.tuning.device_choice import build_target
from ansor_mlir.tuning.options import (
    REWRITES_OPTION,
    STDOUT_LOG,
    TARGET_OPTIONS,
    TUNE_CLI_OPTIONS,
    add_arguments,
    given_arguments,
    new_log_file,
)
from ansor_mlir.tuning.program_choice import recorded_choice

PROG = "ansor-opt"
# Warnings Python hides unless asked (interpreter and library housekeeping): not the user's business.
HIDDEN_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered like Ctrl-C so that the same clean stop runs; `exit_code` is the shell's."""

    exit_code = 128 + signal.SIGTERM


def _terminate(signum: int, frame: object) -> None:
    raise Terminated("terminated (SIGTERM)")


@contextmanager
def clean_stop() -> Iterator[None]:
    """SIGTERM raises `Terminated` while the command runs (the main thread only can install handlers)."""
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread (an embedding application): leave its handlers alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted(prog: str, exc: KeyboardInterrupt) -> int:
    """Report an interrupt in one line (the tuner's says what is in the log and how to resume)."""
    detail = str(exc) or "interrupted; every finished measurement is in the log: rerun the same command to resume"
    print(f"{prog}: {detail}", file=sys.stderr)
    return int(getattr(exc, "exit_code", 130))


@contextmanager
def one_line_warnings(prog: str) -> Iterator[None]:
    """Warnings printed as `PROG: warning: ...` lines as they come, as the tools print every other message; each
    message once, though several steps of one command (the spec built to compile, then written) may raise it."""
    shown: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        if not issubclass(category, HIDDEN_WARNINGS) and str(message) not in shown:
            shown.add(str(message))
            print(f"{prog}: warning: {message}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = show
        yield


def guarded(prog: str, command: Callable[[], int]) -> int:
    """Run a command: user errors and interrupts become one line and a non-zero status."""
    try:
        with clean_stop():
            return command()
    except AnsorError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        return interrupted(prog, exc)


class Parser(argparse.ArgumentParser):
    """Every tool's parser: a usage error is one line, like every other user error."""

    def error(self, message: str):
        self.exit(1, f"{self.prog}: error: {message} (see --help)\n")


class _PassAction(argparse.Action):
    """Collect `--ansor-*[=options]` flags in command-line order."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.passes = [*namespace.passes, (self.dest, values or "")]


class VersionAction(argparse.Action):
    """`--version`: the versions a tuning record is stamped with, then exit (before required arguments are
    checked)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest, nargs=0, default=default,
                         help=help or "print the ansor-mlir, IREE and record schema versions")

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stdout.write(version_text())
        parser.exit(0)


def non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got '{text}'") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got '{text}'")
    return value


def default_log(output: str | Path) -> Path:
    """Every tool's log when none is named: the output's path with `.jsonl` (`-o tuned.vmfb` -> `tuned.jsonl`),
    `ansor_tuning.jsonl` when the output goes to stdout."""
    return STDOUT_LOG if str(output) == "-" else Path(output).with_suffix(".jsonl")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        description="Ansor-style auto-scheduling passes for linalg modules compiled by IREE.",
        epilog=passes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("input", nargs="?", default="-",
                        help="input .mlir file (default: stdin), .onnx model, or PyTorch model as file.py:factory")
    parser.add_argument("-o", dest="output", default="-", help="output file (default: stdout)")
    parser.add_argument("--pass-pipeline", dest="pipeline", metavar="PIPELINE",
                        help="the passes as builtin.module(PASS{KEY=VALUE ...}, ...)")
    parser.add_argument("--split-input-file", action="store_true",
                        help=f"process each chunk between '{SPLIT_MARKER}' lines alone; join the outputs with it")
    parser.add_argument("--verify-diagnostics", action="store_true",
                        help="check the diagnostics against the input's expected-error/expected-warning comments")
    parser.add_argument("--mlir-print-ir-after-all", dest="print_after_all", action="store_true",
                        help="print the IR after every pass to stderr")
    parser.add_argument("--mlir-elide-elementsattrs-if-larger", dest="elide", type=non_negative, metavar="N",
                        help="print elements attributes with more than N elements elided")
    parser.add_argument("--params-out", metavar="FILE",
                        help="where a model input's weights go (default: beside the output, OUTPUT.irpa; MODEL.irpa "
                             "in the working directory when writing to stdout); run the compiled program with "
                             "--parameters=model=FILE")
    parser.add_argument("--allow-unregistered-dialect", action="store_true",
                        help="accept ops of dialects neither IREE nor ansor defines")
    parser.add_argument("--list-passes", action="store_true", help="list the passes and their options")
    parser.add_argument("--version", action=VersionAction)
    for spec in PASSES.values():
        parser.add_argument(f"--{spec.name}", dest=spec.name, nargs="?", const="", action=_PassAction,
                            metavar="OPTIONS", help=spec.summary)
    parser.set_defaults(passes=[])
    return parser


def installed(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def version_text() -> str:
    """The versions a tuning record is stamped with, and IREE's in full."""
    producers = dict(producer_versions())
    revision = ", ".join(f"{name} {rev[:12]}" for name, rev in iree_version.REVISIONS.items())
    return (
        f"ansor-mlir {producers['ansor_mlir']}\n"
        f"IREE {iree_version.VERSION} ({revision}; iree-base-compiler {installed('iree-base-compiler')}, "
        f"iree-base-runtime {installed('iree-base-runtime')})\n"
        f"tuning record schema {FORMAT_VERSION} (cost-model features {producers['features']})\n"
    )


def invocations_of(args: argparse.Namespace) -> list[PassInvocation]:
    """The passes to run; an `ansor-tune` given no log= logs to the output's `.jsonl` (`default_log`)."""
    if args.pipeline is not None and args.passes:
        raise AnsorError("--pass-pipeline cannot be combined with --ansor-* pass flags: use one or the other")
    if args.pipeline is not None:
        invocations = parse_pipeline(args.pipeline)
    else:
        invocations = [parse_options(name, options) for name, options in args.passes]
    return [with_default_log(i, args.output) for i in invocations]


def with_default_log(invocation: PassInvocation, output: str) -> PassInvocation:
    if invocation.name != "ansor-tune" or "log" in invocation.given:
        return invocation
    log = default_log(output)
    try:
        new_log_file(str(log))
    except ValueError as exc:
        raise AnsorError(f"pass 'ansor-tune': the default log {log} (named after -o): {exc}; give log=FILE") from None
    return dataclasses.replace(invocation, options={**invocation.options, "log": log})


# Passes whose output is a program (the others print tasks, sketches, specs or libraries); no pass: the input.
PROGRAM_PASSES = ("ansor-rewrite", "ansor-tune", "ansor-apply-best")
FLOW_PASSES = ("ansor-tune", "ansor-apply-best")


@dataclass(frozen=True)
class Input:
    text: str
    name: str
    # A model input's weights, written where the output's program reads them, or the archive an MLIR input reads
    # (None: none, or not a program).
    weights: Path | None = None
    # The archive's bytes, which a tuned program's whole-program checks run with.
    parameters: bytes = field(default=b"", repr=False)


def read_input(args: argparse.Namespace, invocations: list[PassInvocation]) -> Input:
    """MLIR from a file or stdin; a model (`.onnx`, `file.py:factory`) is imported, and where the output is a
    program (or `--params-out` names a file) its weights are written beside the output
    (`passes.source.parameters_path`) or to that file. An MLIR program that reads its weights brings the archive
    it names (`read_weights`)."""
    path = args.input
    if path == "-":
        return Input(sys.stdin.read(), "<stdin>")
    if is_model_reference(path):
        source = read_model(path)
        if not source.parameters or not (outputs_program(invocations) or args.params_out):
            return Input(source.text, source.name)
        weights = Path(args.params_out) if args.params_out else parameters_path(path, args.output)
        return Input(source.text, source.name, source.write_parameters(weights), source.parameters)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AnsorError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AnsorError(f"{path}: cannot read: {exc}") from None
    weights = read_weights(text, Path(path))
    if weights is None:
        return Input(text, path)
    return Input(text, path, weights[0] if outputs_program(invocations) else None, weights[1])


def read_weights(text: str, path: Path) -> tuple[Path, bytes] | None:
    """The archive a program that reads its weights names in its first line, or NAME.irpa beside it, and its
    bytes; None where the program reads none, or neither is there."""
    if not reads_parameters(text, str(path)):
        return None
    archive = commented_weights(text, path) or path.with_suffix(".irpa")
    try:
        return archive, archive.read_bytes()
    except OSError:
        return None


def outputs_program(invocations: list[PassInvocation]) -> bool:
    return not invocations or invocations[-1].name in PROGRAM_PASSES


WEIGHTS_COMMENT = "// The weights are in "


def weights_comment(weights: Path) -> str:
    """The output's first line where the program reads its weights from an archive."""
    return (f"{WEIGHTS_COMMENT}{weights}, not in this program: run it with --parameters=model={weights}, or "
            f"embed them when building it: iree-compile --iree-parameter-import=model={weights}\n")


UNNAMED_WEIGHTS = "WEIGHTS.irpa"


def commented_weights(text: str, path: Path) -> Path | None:
    """The archive a program written by these tools names in its first line (`weights_comment`), so that the
    program tuned from it says where its weights are too: as written, or beside the program if it is there."""
    first = text.split("\n", 1)[0]
    if not first.startswith(WEIGHTS_COMMENT) or ", not in this program" not in first:
        return None
    named = Path(first[len(WEIGHTS_COMMENT):].split(", not in this program", 1)[0])
    beside = path.parent / named
    return beside if not named.is_absolute() and not named.exists() and beside.exists() else named


def invocation_target(invocation: PassInvocation) -> Target:
    return parse_target(str(invocation["target"]), threads=int(invocation["threads"]), cpu=str(invocation["cpu"]))


def program_notes(output: str, text: str, source: Input, invocations: list[PassInvocation]) -> list[str]:
    """How to build and run the program `text` written to `output`: the commands, with the weights archive and
    the threaded build's fences where it has them (said for models and for tuned programs)."""
    flow = bool(invocations) and invocations[-1].name in FLOW_PASSES
    if not flow and source.weights is None:
        return []
    target = invocation_target(invocations[-1]) if flow else Target()
    entry, given = entry_of(text), entry_of(source.text)
    if entry is None or given is None:
        return []
    # IREE's flow level passes buffer views: the argument types are the input program's.
    inputs = entry.input_types or given.input_types
    path = "OUT.mlir" if output == "-" else output
    vmfb = str(Path(path).with_suffix(".vmfb"))
    program_flags = [*target.compile_flags(), *winograd_flags(text)]
    flags = [*target.codegen_flags(), *flow_level_flags(text)] if flow else program_flags
    threaded = dataclasses.replace(target, threads=max(2, target.threads))
    weights = str(source.weights) if source.weights else None
    unnamed = weights is None and reads_parameters(text, path)
    weights = UNNAMED_WEIGHTS if unnamed else weights
    program = Runnable(vmfb, entry.name, inputs, threaded.runtime_device() if entry.fenced else "local-sync",
                       threaded.runtime_flags() if entry.fenced else (), weights, entry.fenced)
    notes = [f"the weights are in {weights}, not in the program: run it with --parameters=model={weights}, or "
             f"embed them: iree-compile --iree-parameter-import=model={weights}"] if weights and not unnamed else []
    if unnamed:
        notes.append(f"the program reads its weights from an archive it does not name: pass the one written with "
                     f"it (--params-out) in place of {UNNAMED_WEIGHTS}")
    notes += [f"build it: {build_command(path, flags, vmfb)}", f"run it: {run_command(program)}"]
    return notes + how_to_call(program)


def write_output(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise AnsorError(f"{path}: cannot write: {exc}") from None


@dataclass(frozen=True)
class ChunkResult:
    output: str | None
    diagnostics: tuple[Diagnostic, ...]


def run_chunk(chunk: Chunk, name: str, invocations: list[PassInvocation], args: argparse.Namespace,
              parameters: bytes = b"") -> ChunkResult:
    """Parse, check and run the passes on one chunk (a program that reads its weights with their archive); its
    errors and warnings become diagnostics."""

    def dump(number: int, invocation: PassInvocation, module: ir.Module) -> None:
        sys.stderr.write(f"// -----// IR Dump After {invocation.name} (pass {number}) //----- //\n"
                         + print_module(module, args.elide))

    output, error, line = None, None, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            module = read_module(chunk.text, name, new_context(), args.allow_unregistered_dialect)
            line = module_line(module)
            if invocations:
                after = dump if args.print_after_all else None
                module = api.run_pipeline(module, invocations, name=name, after_pass=after,
                                          parameters=parameters).module
            output = print_module(module, args.elide)
        except LocatedError as exc:
            error = Diagnostic("error", str(exc), exc.line)
        except AnsorError as exc:
            error = Diagnostic("error", str(exc), line)
    found = [Diagnostic("warning", str(w.message), line) for w in caught if not issubclass(w.category, HIDDEN_WARNINGS)]
    return ChunkResult(output, tuple(found + ([error] if error else [])))


def process(text: str, name: str, invocations: list[PassInvocation], args: argparse.Namespace,
            parameters: bytes = b"") -> tuple[str, bool]:
    """(output, success) of the whole input: every chunk processed, even after one fails."""
    chunks = split_input(text) if args.split_input_file else [Chunk(text, 1)]
    outputs, ok = [], True
    for chunk in chunks:
        result = run_chunk(chunk, name, invocations, args, parameters)
        if result.output is not None:
            outputs.append(result.output)
        if args.verify_diagnostics:
            complaints = verify(result.diagnostics, expectations(chunk.text), name)
            for complaint in complaints:
                print(complaint, file=sys.stderr)
            ok = ok and not complaints
            continue
        for diagnostic in result.diagnostics:
            print(f"{PROG}: {diagnostic.severity}: {diagnostic.message}", file=sys.stderr)
            ok = ok and diagnostic.severity != "error"
    return join_outputs(outputs), ok


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list_passes:
        sys.stdout.write(passes_help())
        return 0

    def run() -> int:
        invocations = invocations_of(args)
        source = read_input(args, invocations)
        output, ok = process(source.text, source.name, invocations, args, source.parameters)
        if ok and source.weights is not None:
            output = weights_comment(source.weights) + output
        write_output(args.output, output)
        if ok and not (args.split_input_file or args.verify_diagnostics):
            for note in program_notes(args.output, output, source, invocations):
                print(note if note.startswith("    ") else f"{PROG}: note: {note}", file=sys.stderr)
        return 0 if ok else 1

    return guarded(PROG, run)


COMPILE_PROG = "ansor-compile"
COMPILE_DEFAULTS = {"trials": "no tuning: apply the records already in the log (none: IREE's default build)",
                    "log": "OUTPUT with the suffix .jsonl"}


def build_compile_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=COMPILE_PROG,
        description="Import a model, tune it (with --trials, --trials-per-task or --time-budget) and build it into "
                    "an IREE program with the best configuration of every task: .onnx (or file.py:factory, or "
                    "linalg .mlir) to a tuned .vmfb. The options are ansor-opt --ansor-tune's, as flags.",
        allow_abbrev=False,
    )
    parser.add_argument("input", help=".onnx model, PyTorch model as file.py:factory, or linalg .mlir")
    parser.add_argument("-o", dest="output", help="the .vmfb to write (required unless --list-tasks)")
    parser.add_argument("--version", action=VersionAction)
    parser.add_argument("--list-tasks", action="store_true",
                        help="list the model's tasks (name, op, shape, FLOPs, weight) and stop")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="--list-tasks as a table or as JSON (default: table)")
    parser.add_argument("--emit-tuning-spec", metavar="SPEC",
                        help="also write the log's tuning spec, for iree-compile --iree-codegen-tuning-spec-path")
    parser.add_argument("--params-out", metavar="FILE",
                        help="keep the weights out of the .vmfb, in FILE: run with --parameters=model=FILE")
    add_arguments(parser, (*TARGET_OPTIONS, REWRITES_OPTION))
    add_arguments(parser, TUNE_CLI_OPTIONS, COMPILE_DEFAULTS)
    return parser


def compile_target(args: argparse.Namespace) -> Target:
    given = given_arguments(args, TARGET_OPTIONS)
    return api.resolve_target(given.pop("target", "llvm-cpu"), **given)


def compile_model(args: argparse.Namespace) -> list[str]:
    """Import, tune (with a budget), compile; returns the lines printed of what was written and how to run it."""
    if args.output is None:
        raise AnsorError("-o OUTPUT.vmfb is required (or --list-tasks)")
    source = api.load_model(args.input if is_model_reference(args.input) else Path(args.input))
    target = compile_target(args)
    rewrites = args.rewrites or REWRITES_OPTION.default
    searched = given_arguments(args, TUNE_CLI_OPTIONS)
    log = searched.pop("log", None) or default_log(args.output)
    tune = any(key in searched for key in ("trials", "trials_per_task", "time_budget"))
    device = target.runtime_device()
    if tune:
        device = api.tune(source, target, log=log, rewrites=rewrites, **searched).device
    tuned = tune or args.log is not None or log.exists()
    program = api.compile(source, target, log if tuned else None, embed_parameters=args.params_out is None,
                          rewrites=rewrites)
    program.save(args.output)
    how = f"configurations from {log}" if tuned else "IREE's default configurations (no tuning log)"
    weights = None
    if args.params_out and source.parameters:
        weights = source.write_parameters(Path(args.params_out))
    where = f", weights in {weights} (--parameters=model={weights})" if weights else ""
    run = f"; run it with --device={device}" if device != target.runtime_device() else ""
    lines = [f"wrote {args.output}: function {program.function}, {how}{where}{run}"]
    if args.emit_tuning_spec:
        lines += emit_spec(args, source, target, log if tuned else None, rewrites, program.device)
    return lines + run_lines(args.output, program, source, target, weights)


def run_lines(vmfb: str, program: api.CompiledModel, source: ModelSource, target: Target, weights: Path | None,
              ) -> list[str]:
    """The command that runs the written program, and how to call it (its fences, where it has them)."""
    entry = entry_of(source.text)
    if entry is None:
        return []
    fenced = module_is_async(program.vmfb, program.function)
    runtime_flags = target.runtime_flags() if program.device == "local-task" else ()
    runnable = Runnable(vmfb, program.function, entry.input_types, program.device, runtime_flags,
                        str(weights) if weights else None, fenced)
    return [f"run it: {run_command(runnable)}", *how_to_call(runnable)]


def emit_spec(args: argparse.Namespace, source: ModelSource, target: Target, log: Path | None, rewrites: str,
              device: str) -> list[str]:
    """Write the log's tuning spec to --emit-tuning-spec; the line that says how IREE builds with it, and the
    program it is for (the rewritten one, or the model as imported where the log dropped the rewrites)."""
    if log is None:
        raise AnsorError(f"--emit-tuning-spec: no tuning log ({default_log(args.output)} does not exist): tune "
                         "(--trials N) or give --log")
    spec = api.emit_tuning_spec(source, log, target, rewrites=rewrites)
    path = Path(args.emit_tuning_spec)
    try:
        path.write_text(spec, encoding="utf-8")
    except OSError as exc:
        raise AnsorError(f"{path}: cannot write: {exc}") from None
    changed = api.rewritten("ansor-compile", source.text, source.name, rewrites)
    choice = recorded_choice(log, source.text, source.name, changed, target)
    kept = changed.applied and (choice is None or choice.rewrites_kept)
    program = f"{path.with_suffix('')}.program.mlir"
    make = command(["ansor-opt", args.input, f"--ansor-rewrite=rewrites={rewrites if kept else 'none'}", "-o",
                    program])
    flags = [*build_target(target, device).compile_flags(), *tuning_spec_flags(path)]
    return [f"wrote {path}: the tuning spec, for the program `{make}` writes; build that program with it: "
            f"{build_command(program, flags, str(path.with_suffix('.vmfb')))}"]


def task_rows(args: argparse.Namespace) -> list[dict]:
    """The model's tasks as --list-tasks shows them."""
    source = api.load_model(args.input if is_model_reference(args.input) else Path(args.input))
    tasks = api.extract_tasks(source, compile_target(args), rewrites=args.rewrites or REWRITES_OPTION.default)
    return [{"name": t.name, "op": t.root.name, "shape": "x".join(map(str, t.root.loop_extents)),
             "iterators": "".join(kind[0] for kind in t.root.iterator_types), "flops": t.flops, "weight": t.weight,
             "tunable": t.tunable} for t in tasks]


def tasks_table(rows: list[dict]) -> str:
    """One line per task: name, root op, loop shape (p: parallel, r: reduction), FLOPs per call, weight."""
    header = {"name": "task", "op": "op", "shape": "shape", "flops": "FLOPs", "weight": "weight"}
    shown = [header] + [{**r, "shape": f"{r['shape']} ({r['iterators']})", "flops": f"{r['flops']:,}",
                         "name": r["name"] + ("" if r["tunable"] else " (not tunable)")} for r in rows]
    widths = {key: max(len(str(r[key])) for r in shown) for key in header}
    lines = ["  ".join(str(r[key]).ljust(widths[key]) if key in ("name", "op", "shape") else
                       str(r[key]).rjust(widths[key]) for key in header).rstrip() for r in shown]
    return "\n".join(lines) + "\n"


def compile_main(argv: list[str] | None = None) -> int:
    """`ansor-compile`: one command from a model to a tuned .vmfb."""
    args = build_compile_parser().parse_args(argv)

    def run() -> int:
        with one_line_warnings(COMPILE_PROG):
            if args.list_tasks:
                rows = task_rows(args)
                sys.stdout.write(json.dumps(rows, indent=2) + "\n" if args.format == "json" else tasks_table(rows))
                return 0
            for line in compile_model(args):
                print(line if line.startswith("    ") else f"{COMPILE_PROG}: {line}", file=sys.stderr)
        return 0

    return guarded(COMPILE_PROG, run)


if __name__ == "__main__":
    sys.exit(main())

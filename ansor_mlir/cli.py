"""`ansor-opt`: an mlir-opt style driver for the ansor passes.

    ansor-opt IN.mlir --ansor-extract-tasks --ansor-generate-sketches
    ansor-opt IN.mlir --pass-pipeline="builtin.module(ansor-extract-tasks, ansor-generate-sketches)"
    ansor-opt IN.mlir --ansor-tune="trials=32 log=L" -o OUT.mlir
    ansor-opt BAD.mlir --split-input-file --verify-diagnostics --ansor-extract-tasks
    cat IN.mlir | ansor-opt                       # no pass: parse, verify, print

User errors print one `ansor-opt: error: ...` line and exit 1, no traceback. Ctrl-C (SIGINT) and SIGTERM
stop a run cleanly: every finished measurement is already in the log; the message says how to resume, and
the exit status is the shell's for the signal (130, 143).
"""

from __future__ import annotations

import argparse
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from iree.compiler import ir
from iree.compiler import version as iree_version

from ansor_mlir import api
from ansor_mlir.core.target import parse_target
from ansor_mlir.database.records import FORMAT_VERSION, producer_versions
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.model_source import is_model_reference
from ansor_mlir.frontend.program_rewrites import DEFAULT_REWRITES, NO_REWRITES, REWRITES
from ansor_mlir.passes.diagnostics import Diagnostic, LocatedError, expectations, verify
from ansor_mlir.passes.pass_options import PASSES, PassInvocation, parse_options, parse_pipeline, passes_help
from ansor_mlir.passes.source import (
    SPLIT_MARKER,
    Chunk,
    join_outputs,
    module_line,
    new_context,
    print_module,
    read_model,
    read_module,
    split_input,
)
from ansor_mlir.tuning.task_scheduler import SCHEDULERS

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


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, like every other user error
        self.exit(1, f"{self.prog}: error: {message} (see --help)\n")


class _PassAction(argparse.Action):
    """Collect `--ansor-*[=options]` flags in command-line order."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.passes = [*namespace.passes, (self.dest, values or "")]


def non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got '{text}'") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got '{text}'")
    return value


def positive(text: str) -> int:
    value = non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
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
                        help="where a model input's weights go (default: beside it, MODEL.irpa); run the compiled "
                             "program with --parameters=model=FILE")
    parser.add_argument("--allow-unregistered-dialect", action="store_true",
                        help="accept ops of dialects neither IREE nor ansor defines")
    parser.add_argument("--list-passes", action="store_true", help="list the passes and their options")
    parser.add_argument("--version", action="store_true", help="print the ansor-mlir, IREE and record schema versions")
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
    if args.pipeline is not None and args.passes:
        raise AnsorError("--pass-pipeline cannot be combined with --ansor-* pass flags: use one or the other")
    if args.pipeline is not None:
        return parse_pipeline(args.pipeline)
    return [parse_options(name, options) for name, options in args.passes]


def read_input(path: str, parameters_out: str | None = None) -> tuple[str, str]:
    """MLIR from a file or stdin; a model (`.onnx`, `file.py:factory`) is imported, its weights written aside."""
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    if is_model_reference(path):
        return read_model(path, Path(parameters_out) if parameters_out else None)
    try:
        return Path(path).read_text(encoding="utf-8"), path
    except FileNotFoundError:
        raise AnsorError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AnsorError(f"{path}: cannot read: {exc}") from None


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


def run_chunk(chunk: Chunk, name: str, invocations: list[PassInvocation], args: argparse.Namespace) -> ChunkResult:
    """Parse, check and run the passes on one chunk; its errors and warnings become diagnostics."""

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
                module = api.run_pipeline(module, invocations, name=name, after_pass=after).module
            output = print_module(module, args.elide)
        except LocatedError as exc:
            error = Diagnostic("error", str(exc), exc.line)
        except AnsorError as exc:
            error = Diagnostic("error", str(exc), line)
    found = [Diagnostic("warning", str(w.message), line) for w in caught if not issubclass(w.category, HIDDEN_WARNINGS)]
    return ChunkResult(output, tuple(found + ([error] if error else [])))


def process(text: str, name: str, invocations: list[PassInvocation], args: argparse.Namespace) -> tuple[str, bool]:
    """(output, success) of the whole input: every chunk processed, even after one fails."""
    chunks = split_input(text) if args.split_input_file else [Chunk(text, 1)]
    outputs, ok = [], True
    for chunk in chunks:
        result = run_chunk(chunk, name, invocations, args)
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
    if args.version:
        sys.stdout.write(version_text())
        return 0
    if args.list_passes:
        sys.stdout.write(passes_help())
        return 0

    def run() -> int:
        invocations = invocations_of(args)
        text, name = read_input(args.input, args.params_out)
        output, ok = process(text, name, invocations, args)
        write_output(args.output, output)
        return 0 if ok else 1

    return guarded(PROG, run)


COMPILE_PROG = "ansor-compile"


def build_compile_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=COMPILE_PROG,
        description="Import a model, tune it (with --trials) and build it into an IREE program with the best "
                    "configuration of every task: .onnx (or file.py:factory, or linalg .mlir) to a tuned .vmfb.",
        allow_abbrev=False,
    )
    parser.add_argument("input", help=".onnx model, PyTorch model as file.py:factory, or linalg .mlir")
    parser.add_argument("-o", dest="output", required=True, help="the .vmfb to write")
    parser.add_argument("--trials", type=non_negative,
                        help="tune first with this budget for the whole model (as ansor-tune's trials); without it, "
                             "the records already in the log are applied (none: IREE's default build)")
    parser.add_argument("--trials-per-task", type=positive,
                        help="tune first with this budget per task instead of --trials for the whole model")
    parser.add_argument("--task-scheduler", choices=SCHEDULERS, default="gradient",
                        help="how tasks share the budget (default: gradient, Ansor's)")
    parser.add_argument("--log", help="tuning log (default: OUTPUT with the suffix .jsonl)")
    parser.add_argument("--target", default="llvm-cpu", help="backend (default: llvm-cpu)")
    parser.add_argument("--cpu", default="host", help="LLVM CPU name (default: host)")
    parser.add_argument("--threads", type=non_negative, default=1, help="threads when timing (default: 1)")
    parser.add_argument("--seed", type=non_negative, default=0, help="search seed (default: 0)")
    parser.add_argument("--cluster", metavar="tcp://HOST:PORT",
                        help="with --trials, build and measure on this Dask scheduler's workers (as ansor-tune's "
                             "cluster=)")
    parser.add_argument("--rewrites", default=DEFAULT_REWRITES, metavar="|".join([*REWRITES, NO_REWRITES]),
                        help=f"program rewrites applied before tasks are formed (default: {DEFAULT_REWRITES}; "
                             "none: the program as imported)")
    parser.add_argument("--params-out", metavar="FILE",
                        help="keep the weights out of the .vmfb, in FILE: run with --parameters=model=FILE")
    return parser


def compile_model(args: argparse.Namespace) -> str:
    """Import, tune (with --trials), compile; returns what was written, for the one line printed."""
    source = api.load_model(args.input if is_model_reference(args.input) else Path(args.input))
    target = api.resolve_target(parse_target(args.target, threads=args.threads, cpu=args.cpu))
    log = Path(args.log) if args.log else Path(args.output).with_suffix(".jsonl")
    tune = args.trials is not None or args.trials_per_task is not None
    device = target.runtime_device()
    if tune:
        device = api.tune(source, target, trials=args.trials or 0, log=log, seed=args.seed, cluster=args.cluster,
                          trials_per_task=args.trials_per_task, task_scheduler=args.task_scheduler,
                          rewrites=args.rewrites).device
    tuned = tune or args.log is not None or log.exists()
    program = api.compile(source, target, log if tuned else None, embed_parameters=args.params_out is None,
                          rewrites=args.rewrites)
    program.save(args.output)
    how = f"configurations from {log}" if tuned else "IREE's default configurations (no tuning log)"
    where = ""
    if args.params_out and source.parameters:
        source.write_parameters(Path(args.params_out))
        where = f", weights in {args.params_out} (--parameters=model={args.params_out})"
    run = f"; run it with --device={device}" if device != target.runtime_device() else ""
    return f"wrote {args.output}: function {program.function}, {how}{where}{run}"


def compile_main(argv: list[str] | None = None) -> int:
    """`ansor-compile`: one command from a model to a tuned .vmfb."""
    args = build_compile_parser().parse_args(argv)

    def run() -> int:
        print(f"{COMPILE_PROG}: {compile_model(args)}", file=sys.stderr)
        return 0

    return guarded(COMPILE_PROG, run)


if __name__ == "__main__":
    sys.exit(main())

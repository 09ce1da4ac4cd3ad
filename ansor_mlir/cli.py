"""`ansor-opt`: an mlir-opt style driver for the ansor passes.

    ansor-opt IN.mlir --ansor-tune="trials=32 log=L" -o OUT.mlir
    ansor-opt IN.mlir --pass-pipeline="builtin.module(ansor-tune{trials=8 log=L})"
    cat IN.mlir | ansor-opt --ansor-extract-tasks

User errors print one `ansor-opt: error: ...` line and exit 1, no traceback.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from ansor_mlir.errors import AnsorError
from ansor_mlir.passes.ansor_passes import run_pipeline
from ansor_mlir.passes.pass_options import PASSES, PassInvocation, parse_options, parse_pipeline


class _PassAction(argparse.Action):
    """Collect `--ansor-*[=options]` flags in command-line order."""

    def __call__(self, parser, namespace, values, option_string=None):
        invocations = getattr(namespace, "passes", None) or []
        invocations.append((self.dest.replace("_", "-"), values or ""))
        namespace.passes = invocations


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ansor-opt",
        description="Ansor-style auto-scheduling passes for linalg modules compiled by IREE.",
    )
    parser.add_argument("input", nargs="?", default="-", help="input .mlir file (default: stdin)")
    parser.add_argument("-o", dest="output", default="-", help="output file (default: stdout)")
    parser.add_argument("--pass-pipeline", dest="pipeline", help="e.g. builtin.module(ansor-tune{trials=8})")
    for spec in PASSES.values():
        opts = ", ".join(spec.options)
        parser.add_argument(
            f"--{spec.name}", dest=spec.name, nargs="?", const="", action=_PassAction,
            metavar="OPTIONS", help=f"{spec.summary} (options: {opts})",
        )
    parser.set_defaults(passes=[])
    return parser


def read_input(path: str) -> tuple[str, str]:
    if path == "-":
        return sys.stdin.read(), "<stdin>"
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    warnings.formatwarning = lambda message, *rest: f"ansor-opt: warning: {message}\n"
    try:
        invocations = [PassInvocation(name, parse_options(name, opts)) for name, opts in args.passes]
        if args.pipeline:
            invocations += parse_pipeline(args.pipeline)
        if not invocations:
            raise AnsorError("no pass given: use one of " + ", ".join(f"--{n}" for n in PASSES))
        text, name = read_input(args.input)
        write_output(args.output, run_pipeline(text, name, invocations))
    except AnsorError as exc:
        print(f"ansor-opt: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ansor-opt: interrupted; every measured batch is already in the log", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Every option of ansor-mlir, declared once: its name, help, value domain and default.

The table is the `TuneOptions` dataclass (each field's metadata holds its option) plus the target and rewrite
options every tool takes. From it come the `ansor-opt` pass options and their `--help`
(`passes.pass_options`), the `ansor-compile` flags (`add_arguments`), the keyword arguments of `ansor_mlir.tune`,
`compile` and the other API functions (`takes_options`: signature, numpydoc entries, checks) and the checks of a
`TuneOptions` given whole. A value outside its domain is an `AnsorError` naming the option and what it accepts.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
import math
import random
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ansor_mlir.core.target import Target, known_targets
from ansor_mlir.database.records import log_problem
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.program_rewrites import DEFAULT_REWRITES, REWRITES, parse_rewrites, rewrite_choices
from ansor_mlir.measure.builder import Builder
from ansor_mlir.measure.dask_engine import check_address
from ansor_mlir.measure.runner import Runner
from ansor_mlir.mlir.iree_compiler import run_tool
from ansor_mlir.model.cost_model import CostModel
from ansor_mlir.search.search_policy import POLICIES, SearchPolicy, make_policy
from ansor_mlir.tuning.budget_outlook import DEFAULT_TRIALS_PER_TASK
from ansor_mlir.tuning.task_scheduler import SCHEDULERS

SHIPPED_MODEL = "shipped"
# The builders and runners chosen by name (a cluster's come from `cluster`; others are passed as instances).
MEASURERS = ("local",)
NO_MODEL = "none"
MAX_SEED = 2**32 - 1
MAX_TRIALS = 1_000_000
# The log of a run whose output goes to stdout, or that has no output (the Python API).
STDOUT_LOG = Path("ansor_tuning.jsonl")


class BadValue(ValueError):
    """An option value outside its domain; the message says what the domain is."""


@dataclass(frozen=True)
class Option:
    """One option: how to read its text, what values it allows (for --help), its default, and the Python values
    the API takes for it (`types`; None too where the default is None)."""

    name: str
    help: str
    parse: Callable[[str], object]
    allowed: str
    default: object = None
    required: bool = False
    # How --help names the default when it is None.
    no_default: str = "none"
    types: tuple[type, ...] = (str,)
    # Its Python keyword ("" : the name with '-' as '_').
    keyword_name: str = ""
    # On the command line (False: a keyword of the API and a field of `TuneOptions` only).
    cli: bool = True
    # A command-line flag that sets the opposite of a True default (`--quiet` for progress).
    switch: str = ""
    # What --help says the default is, where that is not the default's text (a log named after the output).
    shown_default: str = ""

    @property
    def keyword(self) -> str:
        return self.keyword_name or self.name.replace("-", "_")

    @property
    def default_text(self) -> str:
        if self.shown_default:
            return self.shown_default
        if self.default is None:
            return self.no_default
        if isinstance(self.default, bool):
            return str(int(self.default))
        return str(self.default)

    def describe(self, width: int = 30) -> str:
        """`name=<allowed>  help (default)`; the help goes on its own line after a long `name=<allowed>`."""
        syntax = f"{self.name}=<{self.allowed}>"
        gap = "\n" + " " * (width + 2) if len(syntax) > width else " " * (width - len(syntax) + 2)
        return f"{syntax}{gap}{self.help} ({'required' if self.required else f'default: {self.default_text}'})"

    @property
    def annotation(self) -> object:
        """The Python type of the keyword, for the API's signature."""
        types: list[object] = list(self.types)
        if self.default is None and not self.required:
            types.append(None)
        return functools.reduce(lambda a, b: a | b, types)

    def numpydoc(self) -> str:
        """The keyword's entry in a numpydoc Parameters section."""
        kinds = " or ".join("Path" if t is Path else t.__name__ for t in self.types)
        optional = ", optional" if self.default is None and not self.required else ""
        value = str(self.default) if isinstance(self.default, Path) else self.default
        default = "" if self.default is None else f", default {value!r}"
        allowed = "" if self.types == (bool,) else f" ({self.allowed})"
        text = textwrap.fill(f"{self.help[0].upper()}{self.help[1:]}{allowed}.", width=112, initial_indent="    ",
                             subsequent_indent="    ")
        return f"{self.keyword} : {kinds}{optional}{default}\n{text}"


# ---- value domains --------------------------------------------------------------------------------------------


def integer(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise BadValue(f"expected an integer in [{low}, {high}]") from None
        if not low <= value <= high:
            raise BadValue(f"out of range: expected an integer in [{low}, {high}]")
        return value

    return parse


def at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise BadValue("expected an integer >= 1") from None
    if value < 1:
        raise BadValue("expected an integer >= 1")
    return value


def seconds(text: str) -> float:
    """A positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise BadValue("expected a positive number of seconds") from None
    if not 0 < value < math.inf:
        raise BadValue("expected a positive number of seconds")
    return value


def share(text: str) -> float:
    """A part of a whole: a number in [0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise BadValue("expected a number in [0, 1)") from None
    if not 0.0 <= value < 1.0:
        raise BadValue("out of range: expected a number in [0, 1)")
    return value


def switch(text: str) -> bool:
    """On or off: 1 or 0."""
    return bool(integer(0, 1)(text))


_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?")
DURATION_UNITS = (3600.0, 60.0, 1.0)


def duration(text: str) -> float:
    """Seconds of wall-clock time: `90`, `90s`, `30m`, `2h`, `1h30m`."""
    match = _DURATION.fullmatch(text.strip())
    if not text.strip() or match is None or not any(match.groups()):
        raise BadValue("expected a duration: seconds (90, 90s), minutes (30m), hours (2h) or 1h30m")
    value = sum(float(part) * unit for part, unit in zip(match.groups(), DURATION_UNITS, strict=True) if part)
    if not 0 < value < math.inf:
        raise BadValue("expected a duration above zero")
    return value


def one_of(choices: Callable[[], Sequence[str]]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        valid = choices()
        if text not in valid:
            raise BadValue(f"valid choices are {', '.join(valid)}")
        return text

    return parse


@cache
def llvm_cpu_names() -> tuple[str, ...]:
    """The CPU names IREE's LLVM accepts for the host architecture (LLVM only warns on others)."""
    flags = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
             "--iree-llvmcpu-target-cpu=help", "-", "-o", "-"]
    stderr = run_tool("iree-compile", flags, stdin=b"").stderr
    for line in stderr.splitlines():
        head, sep, names = line.partition("List of accepted CPUs:")
        if sep:
            return tuple(name.strip() for name in names.split(",") if name.strip())
    return ()


def cpu_name(text: str) -> str:
    if text == "host":
        return text
    known = llvm_cpu_names()
    if known and text not in known:
        raise BadValue(f"valid choices are host, {', '.join(known)}")
    return text


def model_choice(text: str) -> str | Path:
    if text in (SHIPPED_MODEL, NO_MODEL):
        return text
    path = Path(text)
    if not path.is_file():
        raise BadValue(f"no such file; valid choices are {SHIPPED_MODEL} (the model in the package), "
                       f"{NO_MODEL} (learn from this run only) or a cost model file")
    return path


def cluster_address(text: str) -> str:
    """A Dask scheduler's address (checked for form here; reached when tuning starts)."""
    try:
        return check_address(text)
    except ValueError as exc:
        raise BadValue(str(exc)) from None


def rewrites(text: str) -> str:
    """Program rewrites by name (`none`, or names joined by `+`); kept as text, read by `parse_rewrites`."""
    try:
        parse_rewrites(text)
    except ValueError as exc:
        raise BadValue(str(exc)) from None
    return text


def log_file(text: str) -> Path:
    """A log the pass reads: a regular file when it exists (a FIFO or a device would hang or never end)."""
    if not text or "\0" in text:
        raise BadValue("expected a file name")
    path = Path(text)
    problem = log_problem(path, writing=False) if path.exists() else None
    if problem:
        raise BadValue(problem)
    return path


def new_log_file(text: str) -> Path:
    """A log the pass appends to: a regular file, or one that can be created in an existing directory."""
    path = log_file(text)
    if not path.absolute().parent.is_dir():
        raise BadValue(f"directory {path.parent} does not exist")
    problem = log_problem(path, writing=True)
    if problem:
        raise BadValue(problem)
    return path


# ---- the options ----------------------------------------------------------------------------------------------

TARGET = Option("target", "compilation target: this host, or a named CPU (aarch64:neoverse-v1)", one_of(known_targets),
                "llvm-cpu|ARCH:CPU", "llvm-cpu", types=(str, Target))
CPU = Option("cpu", "CPU IREE compiles for", cpu_name, "host|LLVM CPU name", "host")
THREADS = Option("threads", "runtime threads used when timing", integer(1, 1024), "1..1024", 1, types=(int,))
REWRITES_OPTION = Option("rewrites", "program rewrites applied before tasks are formed (the tasks, records and output "
                         "are those of the rewritten program)", rewrites, rewrite_choices(), DEFAULT_REWRITES)
TARGET_OPTIONS = (TARGET, CPU, THREADS)
# What every pass but ansor-rewrite takes.
COMMON = (*TARGET_OPTIONS, REWRITES_OPTION)
SEED = Option("seed", "random seed", integer(0, MAX_SEED), f"0..{MAX_SEED}", 0, types=(int,))
READ_LOG = Option("log", "tuning log to read", log_file, "FILE", required=True, types=(str, Path))


def tune_option(name: str, help: str, parse: Callable[[str], object], allowed: str, default: object, **kwargs: Any,
                ) -> Any:
    """A `TuneOptions` field declared with its option (its metadata); the field's default is the option's."""
    return field(default=default, metadata={"option": Option(name, help, parse, allowed, default, **kwargs)})


@dataclass(frozen=True)
class TuneOptions:
    """How a tune searches: each field is an option of `ansor-opt --ansor-tune`, `ansor-compile` and `tune`."""

    trials: int | None = tune_option("trials", "measured candidates of all tasks together, IREE's default of each "
                                     "included (0: pick by the cost model alone)", integer(0, MAX_TRIALS),
                                     f"0..{MAX_TRIALS}", None, types=(int,),
                                     no_default=f"{DEFAULT_TRIALS_PER_TASK} per task of the program; with a time "
                                     "budget alone, until it is spent")
    trials_per_task: int | None = tune_option("trials-per-task", "measured candidates per task instead of in all",
                                              integer(1, MAX_TRIALS), f"1..{MAX_TRIALS}", None, types=(int,),
                                              no_default="none, trials is the total")
    time_budget: float | None = tune_option("time-budget", "wall-clock time the search may take, beside trials: it "
                                            "stops when either is spent", duration, "DURATION (90s, 30m, 2h)", None,
                                            types=(str, float, int), no_default="none, trials alone")
    task_scheduler: str = tune_option("task-scheduler", "how tasks share the trials: Ansor's gradient or in turn",
                                      one_of(lambda: SCHEDULERS), "|".join(SCHEDULERS), "gradient")
    early_stopping: int = tune_option("early-stopping", "gradient scheduler: a task stops after this many trials "
                                      "without improving (0: never)", integer(0, MAX_TRIALS), f"0..{MAX_TRIALS}", 0,
                                      types=(int,))
    log: Path = tune_option("log", "append-only tuning log", new_log_file, "FILE", STDOUT_LOG, types=(str, Path),
                            shown_default=f"OUTPUT with the suffix .jsonl; {STDOUT_LOG} when writing to stdout")
    seed: int = tune_option("seed", SEED.help, SEED.parse, SEED.allowed, 0, types=(int,))
    policy: str = tune_option("policy", "search policy", one_of(lambda: POLICIES), "|".join(POLICIES), "evolutionary")
    model: str | Path | CostModel = tune_option(
        "model", "cost model to start from (the API takes a CostModel too)", model_choice,
        f"{SHIPPED_MODEL}|{NO_MODEL}|FILE", SHIPPED_MODEL, types=(str, Path, CostModel))
    batch_size: int = tune_option("batch-size", "candidates per measured batch", integer(1, 4096), "1..4096", 8,
                                  types=(int,))
    verify: int = tune_option("verify", "best candidates per task checked in the whole program against IREE's "
                              "default (part of trials; 0: none)", integer(0, 64), "0..64", 2, types=(int,))
    one_thread_share: float = tune_option("one-thread-share", "at threads > 1, the part of the trials measured first "
                                          "on one thread, where timings hold still; their best candidates open the "
                                          "threaded search", share, "0..<1", 0.5, types=(float, int))
    progress: bool = tune_option("progress", "show a progress bar and a final table", switch, "0|1", True,
                                 types=(bool,), switch="quiet")
    cluster: str | None = tune_option("cluster", "Dask scheduler: build and measure on its workers (measuring "
                                      "workers declare --resources device=1 --nthreads 1)", cluster_address,
                                      "tcp://HOST:PORT", None, no_default="none, this host")
    build_workers: int = tune_option("build-workers", "parallel compiles", at_least_one, "1..", 2, types=(int,),
                                     cli=False)
    verify_rounds: int = tune_option("verify-rounds", "rounds of each whole-program check", at_least_one, "1..", 15,
                                     types=(int,), cli=False)
    compile_timeout_s: float = tune_option("compile-timeout-s", "seconds a candidate may compile", seconds, "> 0",
                                           60.0, types=(float, int), cli=False)
    run_timeout_s: float = tune_option("run-timeout-s", "seconds a candidate may run", seconds, "> 0", 30.0,
                                       types=(float, int), cli=False)
    min_time_s: float = tune_option("min-time-s", "seconds of timed calls per measurement", seconds, "> 0", 0.1,
                                    types=(float, int), cli=False)
    builder: str | Builder = tune_option("builder", "what compiles candidates: this host's compiler (local), or "
                                         "a Builder", one_of(lambda: MEASURERS), "local|Builder", "local",
                                         types=(str, Builder), cli=False)
    runner: str | Runner = tune_option("runner", "what times candidates: this host (local), or a Runner",
                                       one_of(lambda: MEASURERS), "local|Runner", "local", types=(str, Runner),
                                       cli=False)
    # The program rewrites that made the program tuned (`frontend.program_rewrites`), written in each record:
    # set by the tune from `rewrites=`, not an option.
    rewrites: tuple[str, ...] = ()

    @property
    def pretrained(self) -> bool:
        """Whether the search starts from a trained model rather than from nothing."""
        return self.model != NO_MODEL

    @staticmethod
    def from_values(values: dict[str, object]) -> TuneOptions:
        """Options from checked values keyed by option name or keyword (absent ones keep their defaults)."""
        by_name = {o.name: o.keyword for o in TUNE_OPTIONS}
        return TuneOptions(**{by_name.get(key, key): value for key, value in values.items()
                              if by_name.get(key, key) in KEYWORDS})


TUNE_OPTIONS: tuple[Option, ...] = tuple(
    dataclasses.replace(f.metadata["option"], keyword_name=f.name)
    for f in dataclasses.fields(TuneOptions) if "option" in f.metadata
)
TUNE_CLI_OPTIONS = tuple(o for o in TUNE_OPTIONS if o.cli)
KEYWORDS = frozenset(o.keyword for o in TUNE_OPTIONS)


def tune_cli_option(name: str) -> Option:
    return next(o for o in TUNE_CLI_OPTIONS if o.name == name)


def make_search_policy(options: TuneOptions, target: Target, rng: random.Random) -> SearchPolicy:
    """The search policy `options.policy` names, starting from `options.model` (a name, file or instance)."""
    model = None if isinstance(options.model, str) else options.model
    return make_policy(options.policy, target, rng, model, options.pretrained)


# ---- checks of Python values ----------------------------------------------------------------------------------


def shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def invalid(function: str, name: str, value: object, why: str) -> AnsorError:
    return AnsorError(f"{function}: invalid {name}={shown(value)}: {why}")


def domain(option: Option) -> str:
    """What the command line says of a value outside an option's domain (its parser's own message)."""
    if option.types == (bool,):
        return "expected True or False"
    if Path in option.types and option.parse in (log_file, new_log_file):
        return "expected a file name (str or Path)"
    try:
        option.parse("")
    except BadValue as exc:
        return str(exc)
    return f"expected {option.allowed}"


def check_value(function: str, option: Option, value: object, name: str | None = None) -> object:
    """`value` (a Python value) checked against the option's domain, as the command line checks its text; the
    typed value (a `Path` for a file, seconds for a duration)."""
    name = name or option.keyword
    if value is None and option.default is None and not option.required:
        return None
    if option.types == (bool,):
        if not isinstance(value, bool):
            raise invalid(function, name, value, domain(option))
        return value
    if isinstance(value, bool) or not isinstance(value, option.types):
        raise invalid(function, name, value, domain(option))
    if not isinstance(value, str | Path | int | float):
        return value  # an instance the option takes as it is (a `Target`, a `CostModel`)
    try:
        return option.parse(str(value))
    except BadValue as exc:
        raise invalid(function, name, value, str(exc)) from None


def check_tune_options(function: str, options: object) -> TuneOptions:
    """Every field of a `TuneOptions` within its option's domain; the options with typed values."""
    if not isinstance(options, TuneOptions):
        raise invalid(function, "options", options, "expected a TuneOptions")
    values = {o.keyword: check_value(function, o, getattr(options, o.keyword), f"options.{o.keyword}")
              for o in TUNE_OPTIONS}
    return dataclasses.replace(options, **values)


def takes_options(*options: Option) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a function that ends in `**given` one keyword-only parameter per option: its signature and its
    numpydoc entries (at the docstring's `{options}` line) come from the options. A call's keywords are checked
    against their options before the function runs, which receives the given ones only, typed; an unknown
    keyword is an `AnsorError` naming what is accepted."""
    by_keyword = {o.keyword: o for o in options}

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(function)
        params = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        head = [p for p in params if p.kind is not inspect.Parameter.KEYWORD_ONLY]
        tail = [p for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
        added = [inspect.Parameter(o.keyword, inspect.Parameter.KEYWORD_ONLY, default=o.default,
                                   annotation=o.annotation) for o in options]
        known = [p.name for p in params] + list(by_keyword)

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {key: check_value(function.__name__, by_keyword[key], kwargs.pop(key))
                     for key in list(kwargs) if key in by_keyword}
            unknown = [key for key in kwargs if key not in known]
            if unknown:
                raise AnsorError(f"{function.__name__}: unknown keyword argument '{unknown[0]}' (accepted: "
                                 f"{', '.join(known)})")
            return function(*args, **kwargs, **given)

        wrapper.__signature__ = signature.replace(parameters=[*head, *added, *tail])  # type: ignore[attr-defined]
        wrapper.__doc__ = _with_entries(function.__doc__ or "", [o.numpydoc() for o in options])
        return wrapper

    return decorate


def _with_entries(doc: str, entries: list[str]) -> str:
    """`doc` with its `{options}` line replaced by `entries`, indented as that line is."""
    lines = []
    for line in doc.splitlines():
        if line.strip() != "{options}":
            lines.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        lines += [indent + row for entry in entries for row in entry.splitlines()]
    return "\n".join(lines)


# ---- command lines --------------------------------------------------------------------------------------------


def argparse_type(option: Option) -> Callable[[str], object]:
    """The option's parser as argparse calls it: a value outside the domain is a usage error naming it."""
    def parse(text: str) -> object:
        try:
            return option.parse(text)
        except BadValue as exc:
            raise argparse.ArgumentTypeError(f"invalid value '{text}': {exc}") from None

    parse.__name__ = option.name
    return parse


def add_arguments(parser: argparse.ArgumentParser, options: Sequence[Option], defaults: dict[str, str] | None = None,
                  ) -> None:
    """A `--NAME` flag per option (a `--switch` for one with a switch); an absent flag is None, so that the
    caller passes on only what was given. `defaults` overrides what --help says a default is."""
    for option in options:
        default = (defaults or {}).get(option.name, option.default_text)
        if option.switch:
            parser.add_argument(f"--{option.switch}", dest=option.keyword, action="store_false", default=None,
                                help=f"do not {option.help}")
            continue
        metavar = "REWRITE[+REWRITE...]" if option is REWRITES_OPTION else cli_metavar(option)
        choices = f"; one of {', '.join([*REWRITES, 'none'])}" if option is REWRITES_OPTION else ""
        parser.add_argument(f"--{option.name}", dest=option.keyword, type=argparse_type(option), metavar=metavar,
                            help=f"{option.help}{choices} (default: {default})")


def cli_metavar(option: Option) -> str:
    """What --help shows as a flag's value: its allowed values, or a word for them (`DURATION`, `CPU`)."""
    if " " not in option.allowed:
        return option.allowed
    word = option.allowed.split(" ")[0]
    return word if word.isupper() else option.name.upper()


def given_arguments(args: argparse.Namespace, options: Sequence[Option]) -> dict[str, object]:
    """The options given on the command line, by keyword, typed."""
    return {o.keyword: value for o in options if (value := getattr(args, o.keyword, None)) is not None}

"""The `ansor-*` passes' names and typed options, in mlir-opt's conventions.

`--ansor-tune="trials=8 log=F"`, `--pass-pipeline="builtin.module(ansor-tune{trials=8 log=F})"` and the
Python pipeline API all end up as `PassInvocation`s whose options are checked and typed here: an unknown
pass, option, choice (rule, policy, target, model, CPU) or an out-of-range number is an `AnsorError` that
names the pass and lists what is accepted.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from ansor_mlir.core.target import known_targets
from ansor_mlir.database.records import log_problem
from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.program_rewrites import DEFAULT_REWRITES, parse_rewrites, rewrite_choices
from ansor_mlir.measure.dask_engine import check_address
from ansor_mlir.mlir.iree_compiler import run_tool
from ansor_mlir.search.search_policy import POLICIES
from ansor_mlir.space.sketch_rules import RULES_BY_BACKEND
from ansor_mlir.tuning.task_scheduler import SCHEDULERS

SHIPPED_MODEL = "shipped"
NO_MODEL = "none"
MAX_SEED = 2**32 - 1


class BadValue(ValueError):
    """An option value outside its domain; the message says what the domain is."""


@dataclass(frozen=True)
class Option:
    """One pass option: how to read its text, what values it allows (for --help), its default."""

    name: str
    help: str
    parse: Callable[[str], object]
    allowed: str
    default: object = None
    required: bool = False
    # How --help names the default when it is None.
    no_default: str = "none"

    def describe(self, width: int = 30) -> str:
        """`name=<allowed>  help (default)`; the help goes on its own line after a long `name=<allowed>`."""
        default = self.no_default if self.default is None else self.default
        syntax = f"{self.name}=<{self.allowed}>"
        gap = "\n" + " " * (width + 2) if len(syntax) > width else " " * (width - len(syntax) + 2)
        return f"{syntax}{gap}{self.help} ({'required' if self.required else f'default: {default}'})"


@dataclass(frozen=True)
class PassSpec:
    name: str
    summary: str
    options: tuple[Option, ...]

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)


@dataclass(frozen=True)
class PassInvocation:
    """A pass with its options checked and typed (every option present, defaults filled in)."""

    name: str
    options: Mapping[str, object] = field(default_factory=dict)

    def __getitem__(self, key: str) -> object:
        return self.options[key]


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


def share() -> Callable[[str], float]:
    """A part of a whole: a number in [0, 1)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise BadValue("expected a number in [0, 1)") from None
        if not 0.0 <= value < 1.0:
            raise BadValue("out of range: expected a number in [0, 1)")
        return value

    return parse


def one_of(choices: Callable[[], Sequence[str]]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        valid = choices()
        if text not in valid:
            raise BadValue(f"valid choices are {', '.join(valid)}")
        return text

    return parse


def rule_names() -> tuple[str, ...]:
    """Every sketch rule name of every backend, in rule-list order."""
    names: dict[str, None] = {}
    for factory in RULES_BY_BACKEND.values():
        names.update((rule.name, None) for rule in factory())
    return tuple(names)


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


# ---- the passes -----------------------------------------------------------------------------------------------

COMMON = (
    Option("target", "compilation target: this host, or a named CPU (aarch64:neoverse-v1)", one_of(known_targets),
           "llvm-cpu|ARCH:CPU", "llvm-cpu"),
    Option("cpu", "CPU IREE compiles for", cpu_name, "host|LLVM CPU name", "host"),
    Option("threads", "runtime threads used when timing", integer(1, 1024), "1..1024", 1),
)
REWRITES = Option("rewrites", "program rewrites applied before tasks are formed (the tasks, records and output "
                  "are those of the rewritten program)", rewrites, rewrite_choices(), DEFAULT_REWRITES)
COMMON = (*COMMON, REWRITES)
SEED = Option("seed", "random seed", integer(0, MAX_SEED), f"0..{MAX_SEED}", 0)
READ_LOG = Option("log", "tuning log to read", log_file, "FILE", required=True)

PASSES: dict[str, PassSpec] = {
    spec.name: spec
    for spec in (
        PassSpec("ansor-rewrite", "the program after its rewrites, as linalg: the input of ordinary IREE flows "
                 "(iree-compile with a tuning spec or transform library) for what ansor-mlir tuned", (REWRITES,)),
        PassSpec("ansor-extract-tasks", "the tasks (unique dispatches) as ansor dialect IR", COMMON),
        PassSpec("ansor-generate-sketches", "each task with its sketches (matchers with holes) as ansor dialect IR",
                 COMMON),
        PassSpec(
            "ansor-tune",
            "tune every task, then output IREE's flow-level module with the best configurations attached",
            (
                *COMMON,
                Option("trials", "measured candidates of all tasks together, IREE's default of each included "
                       "(0: pick by the cost model alone)", integer(0, 1_000_000), "0..1000000", 32),
                Option("trials-per-task", "measured candidates per task instead of in all",
                       integer(1, 1_000_000), "1..1000000", no_default="none, trials is the total"),
                Option("task-scheduler", "how tasks share the trials: Ansor's gradient or in turn",
                       one_of(lambda: SCHEDULERS), "|".join(SCHEDULERS), "gradient"),
                Option("early-stopping", "gradient scheduler: a task stops after this many trials without "
                       "improving (0: never)", integer(0, 1_000_000), "0..1000000", 0),
                Option("log", "append-only tuning log", new_log_file, "FILE", Path("ansor_tuning.jsonl")),
                SEED,
                Option("policy", "search policy", one_of(lambda: POLICIES), "|".join(POLICIES), "evolutionary"),
                Option("model", "cost model to start from", model_choice, f"{SHIPPED_MODEL}|{NO_MODEL}|FILE",
                       SHIPPED_MODEL),
                Option("batch", "candidates per measured batch", integer(1, 4096), "1..4096", 8),
                Option("verify", "best candidates per task checked in the whole program against IREE's default "
                       "(part of trials; 0: none)", integer(0, 64), "0..64", 2),
                Option("one-thread-share", "at threads > 1, the part of the trials measured first on one thread, "
                       "where timings hold still; their best candidates open the threaded search", share(),
                       "0..<1", 0.5),
                Option("progress", "show a progress bar and a final table", integer(0, 1), "0|1", 1),
                Option("cluster", "Dask scheduler: build and measure on its workers (measuring workers declare "
                       "--resources device=1 --nthreads 1)", cluster_address, "tcp://HOST:PORT",
                       no_default="none, this host"),
            ),
        ),
        PassSpec("ansor-apply-best", "IREE's flow-level module with the best recorded configurations; no tuning",
                 (*COMMON, READ_LOG)),
        PassSpec("ansor-emit-tuning-spec", "one tuning spec for --iree-codegen-tuning-spec-path", (*COMMON, READ_LOG)),
        PassSpec("ansor-emit-transform-library",
                 "the best transform strategies, a library for --iree-codegen-transform-dialect-library",
                 (*COMMON, READ_LOG)),
        PassSpec("ansor-print-strategy",
                 "the codegen strategy of one seeded random candidate of each task's transform sketches",
                 (*COMMON, SEED,
                  Option("rule", "only sketches derived by this rule", one_of(rule_names), "|".join(rule_names()),
                         no_default="any rule"))),
    )
}


def pass_spec(name: str) -> PassSpec:
    spec = PASSES.get(name)
    if spec is None:
        raise AnsorError(f"unknown pass '{name}': available passes are {', '.join(PASSES)}")
    return spec


def split_options(pass_name: str, text: str) -> list[str]:
    """`key=value` tokens separated by spaces or commas; values may be quoted."""
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace += ","
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError as exc:
        raise AnsorError(f"pass '{pass_name}': cannot read options '{text}': {exc}") from None


def parse_options(pass_name: str, text: str) -> PassInvocation:
    """Check and type `key=value ...` for a pass; options not given get their defaults."""
    spec = pass_spec(pass_name)
    given: dict[str, object] = {}
    for token in split_options(pass_name, text):
        key, sep, value = token.partition("=")
        option = spec.option(key)
        if not sep or not key:
            raise AnsorError(f"pass '{pass_name}': option '{token}' must be key=value")
        if option is None:
            raise AnsorError(
                f"pass '{pass_name}': unknown option '{key}' (accepted: {', '.join(o.name for o in spec.options)})"
            )
        if key in given:
            raise AnsorError(f"pass '{pass_name}': option '{key}' given twice")
        try:
            given[key] = option.parse(value)
        except BadValue as exc:
            raise AnsorError(f"pass '{pass_name}': invalid {key}={value}: {exc}") from None
    missing = [o.name for o in spec.options if o.required and o.name not in given]
    if missing:
        raise AnsorError(f"pass '{pass_name}': missing required option {', '.join(m + '=...' for m in missing)}")
    return PassInvocation(pass_name, {o.name: given.get(o.name, o.default) for o in spec.options})


def parse_pass(text: str) -> PassInvocation:
    """One `name{key=value ...}` element of a pipeline (the braces are optional)."""
    name, brace, rest = text.strip().partition("{")
    name = name.strip()
    if brace and not rest.rstrip().endswith("}"):
        raise AnsorError(f"--pass-pipeline: '{text.strip()}': options must be closed with '}}'")
    if not name:
        raise AnsorError(f"--pass-pipeline: '{text.strip()}': missing pass name")
    return parse_options(name, rest.rstrip()[:-1] if brace else "")


def split_top_level(text: str, what: str) -> list[str]:
    """Split on commas outside braces and quotes."""
    items, depth, quote, start = [], 0, "", 0
    for pos, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth < 0:
                raise AnsorError(f"{what}: unbalanced '}}' in '{text}'")
        elif char == "," and depth == 0:
            items.append(text[start:pos])
            start = pos + 1
    if depth or quote:
        raise AnsorError(f"{what}: unbalanced {'quote' if quote else 'braces'} in '{text}'")
    items.append(text[start:])
    return items


def parse_pipeline(text: str) -> list[PassInvocation]:
    """`builtin.module(p1{k=v}, p2)` as pass invocations, in order."""
    anchor, paren, rest = text.strip().partition("(")
    if anchor.strip() != "builtin.module" or not paren or not rest.rstrip().endswith(")"):
        raise AnsorError(f"--pass-pipeline: expected 'builtin.module(PASS{{OPTIONS}}, ...)', got '{text}'")
    items = [item for item in split_top_level(rest.rstrip()[:-1], "--pass-pipeline") if item.strip()]
    if not items:
        raise AnsorError(f"--pass-pipeline: no passes in '{text}'")
    return [parse_pass(item) for item in items]


def as_invocations(pipeline: str | Sequence[str | PassInvocation]) -> list[PassInvocation]:
    """A pipeline string, or a list of `name{options}` strings and invocations."""
    if isinstance(pipeline, str):
        return parse_pipeline(pipeline)
    return [item if isinstance(item, PassInvocation) else parse_pass(item) for item in pipeline]


def passes_help() -> str:
    """Every pass with every option, its allowed values and default (for --help and --list-passes)."""
    lines = ["Passes (in order as --NAME[=\"KEY=VALUE ...\"], or --pass-pipeline=\"builtin.module(NAME{KEY=VALUE ...}, "
             "...)\"):"]
    for spec in PASSES.values():
        lines.append(f"  --{spec.name}: {spec.summary}")
        lines.extend("      " + option.describe().replace("\n", "\n      ") for option in spec.options)
    return "\n".join(lines) + "\n"

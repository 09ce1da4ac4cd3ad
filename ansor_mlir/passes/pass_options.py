"""The `ansor-*` passes' names and typed options, in mlir-opt's conventions.

`--ansor-tune="trials=8 log=F"`, `--pass-pipeline="builtin.module(ansor-tune{trials=8 log=F})"` and the
Python pipeline API all end up as `PassInvocation`s whose options are checked and typed here: an unknown
pass, option, choice (rule, policy, target, model, CPU) or an out-of-range number is an `AnsorError` that
names the pass and lists what is accepted.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ansor_mlir.errors import AnsorError
from ansor_mlir.space.sketch_rules import RULES_BY_BACKEND
from ansor_mlir.tuning.options import (
    COMMON,
    READ_LOG,
    REWRITES_OPTION,
    SEED,
    TUNE_CLI_OPTIONS,
    BadValue,
    Option,
    one_of,
)

__all__ = ["PASSES", "BadValue", "Option", "PassInvocation", "PassSpec", "parse_options", "parse_pipeline",
           "passes_help"]


@dataclass(frozen=True)
class PassSpec:
    name: str
    summary: str
    options: tuple[Option, ...]

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)

    @property
    def own_options(self) -> tuple[Option, ...]:
        """The options --help lists under the pass: those beyond the common ones."""
        return tuple(o for o in self.options if o not in COMMON)


@dataclass(frozen=True)
class PassInvocation:
    """A pass with its options checked and typed (every option present, defaults filled in); `given` names the
    options the invocation set itself."""

    name: str
    options: Mapping[str, object] = field(default_factory=dict)
    given: frozenset[str] = frozenset()

    def __getitem__(self, key: str) -> object:
        return self.options[key]


def rule_names() -> tuple[str, ...]:
    """Every sketch rule name of every backend, in rule-list order."""
    names: dict[str, None] = {}
    for factory in RULES_BY_BACKEND.values():
        names.update((rule.name, None) for rule in factory())
    return tuple(names)


PASSES: dict[str, PassSpec] = {
    spec.name: spec
    for spec in (
        PassSpec("ansor-rewrite", "the program after its rewrites, as linalg: the input of ordinary IREE flows "
                 "(iree-compile with a tuning spec or transform library) for what ansor-mlir tuned",
                 (REWRITES_OPTION,)),
        PassSpec("ansor-extract-tasks", "the tasks (unique dispatches) as ansor dialect IR", COMMON),
        PassSpec("ansor-generate-sketches", "each task with its sketches (matchers with holes) as ansor dialect IR",
                 COMMON),
        PassSpec("ansor-tune",
                 "tune every task, then output IREE's flow-level module with the best configurations attached",
                 (*COMMON, *TUNE_CLI_OPTIONS)),
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
    return PassInvocation(pass_name, {o.name: given.get(o.name, o.default) for o in spec.options}, frozenset(given))


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
    """Every pass with its options, their allowed values and defaults (for --help and --list-passes): the options
    most passes share once, then each pass with the options of its own."""
    lines = [f"Options of every pass ({', '.join(o.name for o in COMMON)}; ansor-rewrite takes rewrites only):"]
    lines.extend("  " + option.describe().replace("\n", "\n  ") for option in COMMON)
    lines.append("Passes (in order as --NAME[=\"KEY=VALUE ...\"], or --pass-pipeline=\"builtin.module(NAME{KEY=VALUE "
                 "...}, ...)\"):")
    for spec in PASSES.values():
        lines.append(f"  --{spec.name}: {spec.summary}")
        lines.extend("      " + option.describe().replace("\n", "\n      ") for option in spec.own_options)
    return "\n".join(lines) + "\n"

"""Pass names and options in mlir-opt's conventions.

`--ansor-tune="trials=8 log=F"` and `--pass-pipeline="builtin.module(ansor-tune{trials=8 log=F})"`
both end up as a list of `PassInvocation`s; unknown passes or options are
user errors that name the pass and list what is accepted.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from ansor_mlir.errors import AnsorError


@dataclass(frozen=True)
class PassSpec:
    name: str
    summary: str
    options: dict[str, str]  # option name -> help text
    required: tuple[str, ...] = ()


@dataclass(frozen=True)
class PassInvocation:
    name: str
    options: dict[str, str]


COMMON = {
    "target": "compilation target (llvm-cpu)",
    "cpu": "CPU name for IREE (default: host)",
    "threads": "runtime threads used when timing (default 1)",
}

PASSES = {
    spec.name: spec
    for spec in (
        PassSpec("ansor-extract-tasks", "print the tasks (unique dispatches) as ansor dialect IR", COMMON),
        PassSpec("ansor-generate-sketches", "print each task's sketches as transform IR with holes", COMMON),
        PassSpec(
            "ansor-tune",
            "tune every task, then output the module with the best configurations attached",
            {
                **COMMON,
                "trials": "measured candidates per task (default 32; 0 = pick by the cost model alone)",
                "log": "append-only tuning log (default ansor_tuning.jsonl)",
                "seed": "random seed (default 0)",
                "policy": "search policy: evolutionary (default, cost-model guided) or random",
                "model": "cost model file to start from (default: the one shipped in the package)",
                "batch": "candidates per measured batch (default 8)",
                "progress": "1 to show a progress bar and final table (default 1)",
            },
        ),
        PassSpec("ansor-apply-best", "attach the best recorded configurations; no tuning",
                 {**COMMON, "log": "tuning log to read"}, ("log",)),
        PassSpec("ansor-emit-tuning-spec", "print one tuning spec for --iree-codegen-tuning-spec-path",
                 {**COMMON, "log": "tuning log to read"}, ("log",)),
        PassSpec("ansor-emit-transform-library",
                 "print the best transform strategies as a library for --iree-codegen-transform-dialect-library",
                 {**COMMON, "log": "tuning log to read"}, ("log",)),
        PassSpec("ansor-print-strategy",
                 "print the codegen strategy of one seeded random candidate of each task's transform sketches",
                 {**COMMON, "seed": "random seed (default 0)", "rule": "only sketches derived by this rule"}),
    )
}


def parse_options(pass_name: str, text: str) -> dict[str, str]:
    """Parse `key=value key2=value2` (quotes allowed) for a pass."""
    spec = PASSES.get(pass_name)
    if spec is None:
        raise AnsorError(f"unknown pass '{pass_name}': available passes are {', '.join(PASSES)}")
    try:
        tokens = shlex.split(text.replace(",", " ")) if text else []
    except ValueError as exc:
        raise AnsorError(f"pass '{pass_name}': cannot parse options '{text}': {exc}") from None
    options: dict[str, str] = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise AnsorError(f"pass '{pass_name}': option '{token}' must be key=value")
        if key not in spec.options:
            raise AnsorError(
                f"pass '{pass_name}': unknown option '{key}' (accepted: {', '.join(spec.options)})"
            )
        options[key] = value
    missing = [name for name in spec.required if name not in options]
    if missing:
        raise AnsorError(f"pass '{pass_name}': missing required option {', '.join(missing)}=...")
    return options


def parse_pipeline(text: str) -> list[PassInvocation]:
    """Parse `builtin.module(p1{k=v}, p2)` into pass invocations."""
    match = re.fullmatch(r"\s*builtin\.module\((.*)\)\s*", text, re.S)
    if not match:
        raise AnsorError(f"--pass-pipeline: expected 'builtin.module(...)', got '{text}'")
    out = []
    for item in re.finditer(r"([\w-]+)\s*(?:\{([^}]*)\})?\s*(?:,|$)", match.group(1).strip()):
        if not item.group(1):
            continue
        out.append(PassInvocation(item.group(1), parse_options(item.group(1), item.group(2) or "")))
    if not out:
        raise AnsorError(f"--pass-pipeline: no passes in '{text}'")
    return out


def int_option(pass_name: str, options: dict[str, str], key: str, default: int) -> int:
    value = options.get(key)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise AnsorError(f"pass '{pass_name}': option {key}={value} is not an integer") from None

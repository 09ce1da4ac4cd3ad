"""Diagnostics located in the input file, and `--verify-diagnostics` in mlir-opt's style.

An input file states the errors and warnings it expects in comments:

    // expected-error @below {{dynamic shapes}}
    func.func @f(%a: tensor<?xf32>) -> tensor<?xf32> { ... }
    %0 = arith.addf %a, %a : tensor<4xf32   // expected-error {{expected '>'}}

Forms: `expected-error|warning|note|remark`, optionally `-re` (`{{...}}`
inside the text is a regular expression), at the comment's own line, `@+N`,
`@-N`, `@above`, `@below` (the nearest line that is not itself an
expectation) or `@unknown` (a diagnostic about no line in particular). Every
expected diagnostic must be produced and every produced one expected. A pass
that fails on a whole module (and a warning it gives) is reported at the
module's line: its `module` keyword, or its first op when the module is implicit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ansor_mlir.errors import AnsorError

_EXPECTED = re.compile(
    r"expected-(?P<severity>error|warning|note|remark)(?P<re>-re)?"
    r"\s*(?:@(?P<at>[+-]\d+|above|below|unknown))?\s*\{\{(?P<text>.*)\}\}\s*$"
)
_REGEX_PART = re.compile(r"\{\{(.*?)\}\}")


class LocatedError(AnsorError):
    """A user error about a line of the input file (`line` None: about the input as a whole)."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class Diagnostic:
    severity: str
    message: str
    line: int | None = None


@dataclass(frozen=True)
class Expected:
    """One `expected-*` comment: what it expects, where (`line` None for `@unknown`), and where it is written."""

    severity: str
    pattern: str
    is_regex: bool
    line: int | None
    written_at: int

    def matches(self, diagnostic: Diagnostic) -> bool:
        if diagnostic.severity != self.severity or diagnostic.line != self.line:
            return False
        if not self.is_regex:
            return self.pattern in diagnostic.message
        return re.search(regex_of(self.pattern), diagnostic.message) is not None


def regex_of(pattern: str) -> str:
    """`literal {{regex}} literal` as one regular expression."""
    parts, last = [], 0
    for match in _REGEX_PART.finditer(pattern):
        parts += [re.escape(pattern[last:match.start()]), f"(?:{match.group(1)})"]
        last = match.end()
    return "".join([*parts, re.escape(pattern[last:])])


def expectations(text: str) -> list[Expected]:
    """The `expected-*` comments of `text`, with 1-based line numbers as in `text`."""
    found: list[Expected] = []
    below: list[tuple[str, str, bool, int]] = []
    last_plain: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = _EXPECTED.search(line)
        if match is None:
            found += [Expected(sev, pat, is_re, number, at) for sev, pat, is_re, at in below]
            below.clear()
            last_plain = number
            continue
        severity, pattern, is_regex, at = match["severity"], match["text"], bool(match["re"]), match["at"]
        if at == "below":
            below.append((severity, pattern, is_regex, number))
            continue
        if at == "unknown":
            target: int | None = None
        elif at == "above":
            target = last_plain if last_plain is not None else number
        else:
            target = number + int(at or 0)
        found.append(Expected(severity, pattern, is_regex, target, number))
    found += [Expected(sev, pat, is_re, at + 1, at) for sev, pat, is_re, at in below]
    return found


def verify(diagnostics: Sequence[Diagnostic], expected: Sequence[Expected], name: str) -> list[str]:
    """mlir-opt style complaints (`FILE:LINE: error: ...`): unexpected diagnostics and unmet expectations."""
    unmet = list(expected)
    complaints = []
    for diagnostic in diagnostics:
        match = next((e for e in unmet if e.matches(diagnostic)), None)
        if match is not None:
            unmet.remove(match)
            continue
        where = f"{name}:{diagnostic.line}" if diagnostic.line is not None else name
        complaints.append(f"{where}: error: unexpected {diagnostic.severity}: {diagnostic.message}")
    for e in unmet:
        at = "unknown location" if e.line is None else f"line {e.line}"
        complaints.append(
            f'{name}:{e.written_at}: error: expected {e.severity} "{e.pattern}" at {at} was not produced'
        )
    return complaints

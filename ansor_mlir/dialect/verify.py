"""Verify `ansor` dialect IR against its IRDL definition with IREE's own `iree-opt`.

IREE's Python bindings cannot load IRDL (their `dialects/ext.py` needs an
`irdl` module the bundle lacks), so ansor-opt parses `ansor` ops as
unregistered and asks `iree-opt --irdl-file=ansor.irdl.mlir`, which loads the
dialect and checks every op against it, whether the text is valid.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansor_mlir.dialect.ansor_ir import IRDL_PATH
from ansor_mlir.mlir.iree_compiler import first_error_line, run_tool

STDIN = "<stdin>:"


@dataclass(frozen=True)
class IrdlError:
    line: int | None
    message: str


def irdl_error(text: str, allow_unregistered: bool = False) -> IrdlError | None:
    """The first error `iree-opt` reports on `text` with the ansor dialect loaded, or None if it verifies."""
    flags = [f"--irdl-file={IRDL_PATH}", "-", "-o", "/dev/null"]
    if allow_unregistered:
        flags.insert(0, "--allow-unregistered-dialect")
    result = run_tool("iree-opt", flags, stdin=text.encode())
    if result.ok:
        return None
    return parse_diagnostic(first_error_line(result.stderr))


def parse_diagnostic(line: str) -> IrdlError:
    """`<stdin>:LINE:COL: error: MESSAGE` as (LINE, MESSAGE); other lines as they are."""
    if line.startswith(STDIN):
        where, sep, message = line[len(STDIN):].partition(": error: ")
        row = where.split(":")[0]
        if sep and row.isdigit():
            return IrdlError(int(row), message)
    return IrdlError(None, line)

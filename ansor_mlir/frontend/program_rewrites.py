"""Program rewrites: changes to the user's linalg program made before IREE forms its dispatches.

Some speedups no schedule of a task can reach, because the task IREE forms
has already lost what they need (a transposed convolution's task receives its
zero-inserted input as an ordinary tensor). Those are rewrites of the whole
program, applied once where the program enters ansor-mlir, so task
extraction, tuning, `--ansor-apply-best`, the tuning spec and `compile` all
see the same rewritten program and the same task keys. `rewrites=none`
keeps the program as given. A program no rewrite changes keeps its text byte
for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from iree.compiler import ir

from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.border_split import NAME as BORDER_SPLIT
from ansor_mlir.frontend.border_split import split_padded_borders
from ansor_mlir.frontend.channels_last import NAME as CHANNELS_LAST
from ansor_mlir.frontend.channels_last import convert_to_channels_last
from ansor_mlir.frontend.pad_fusion import CONV1D_NAME as CONV1D_PAD_FUSION
from ansor_mlir.frontend.pad_fusion import NAME as PAD_FUSION
from ansor_mlir.frontend.pad_fusion import fuse_pads_into_1d_convolutions, fuse_pads_into_window_ops
from ansor_mlir.frontend.phase_decomposition import NAME as PHASE_DECOMPOSITION
from ansor_mlir.frontend.phase_decomposition import decompose_transposed_convolutions
from ansor_mlir.frontend.reciprocal_division import NAME as RECIPROCAL_DIVISION
from ansor_mlir.frontend.reciprocal_division import divide_by_reciprocals
from ansor_mlir.frontend.shared_subexpressions import NAME as SHARED_SUBEXPRESSIONS
from ansor_mlir.frontend.shared_subexpressions import share_subexpressions
from ansor_mlir.frontend.winograd import NAME as WINOGRAD
from ansor_mlir.frontend.winograd import convert_to_winograd
from ansor_mlir.mlir.context import new_context, parse_module

# name -> rewrite of a module in place, returning how many ops it rewrote.
REWRITES: dict[str, Callable[[ir.Module], int]] = {
    PHASE_DECOMPOSITION: decompose_transposed_convolutions,
    CHANNELS_LAST: convert_to_channels_last,
    BORDER_SPLIT: split_padded_borders,
    WINOGRAD: convert_to_winograd,
    PAD_FUSION: fuse_pads_into_window_ops,
    CONV1D_PAD_FUSION: fuse_pads_into_1d_convolutions,
    SHARED_SUBEXPRESSIONS: share_subexpressions,
    RECIPROCAL_DIVISION: divide_by_reciprocals,
}
NO_REWRITES = "none"
SEPARATOR = "+"
# Phase decomposition first: the convolutions it makes are then channels-last ones too. Border split next, on
# those final convolutions; it changes only a convolution with enough of its taps on padding to repay the split
# (its thresholds and what they select: docs/reports/program_rewrites.md). Pad fusion is
# opt-in (`rewrites=phase-decomposition+channels-last+border-split+pad-fusion`, last, on the final form of every
# window op; `conv1d-pad-fusion` likewise): a flow-level module it shaped builds only with
# `--iree-flow-enable-pad-handling`
# (`mlir.iree_compiler`); border split splits no op pad fusion wrapped. Shared subexpressions reads generics only
# (a softmax written with its `exp` in two of them), which none of the others make or change. Reciprocal division
# is opt-in too (it rounds differently from the division it replaces, `frontend/reciprocal_division.py`), and so
# is Winograd (`frontend/winograd.py`), after channels-last, whose NHWC convolutions it converts.
DEFAULT_REWRITES = SEPARATOR.join((PHASE_DECOMPOSITION, CHANNELS_LAST, BORDER_SPLIT, SHARED_SUBEXPRESSIONS))


def rewrite_choices() -> str:
    """The `rewrites=` syntax for help texts."""
    return "|".join([*REWRITES, NO_REWRITES]) + f" (several joined by {SEPARATOR})"


def parse_rewrites(text: str) -> tuple[str, ...]:
    """`phase-decomposition`, `channels-last`, `none`, or names joined by `+`, as the rewrites they name (in order)."""
    if text == NO_REWRITES:
        return ()
    names = tuple(text.split(SEPARATOR))
    unknown = [n for n in names if n not in REWRITES]
    if unknown or not names or len(set(names)) != len(names):
        raise ValueError(f"expected {NO_REWRITES} or one or more of {', '.join(REWRITES)} joined by {SEPARATOR}")
    return names


@dataclass(frozen=True)
class RewrittenProgram:
    """The program after the rewrites, and which of them changed it (name, ops rewritten)."""

    text: str
    applied: tuple[tuple[str, int], ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.applied)

    def summary(self) -> str:
        """`phase-decomposition (1 op)`: what was rewritten, for notes and warnings."""
        return ", ".join(f"{name} ({count} op{'s' * (count != 1)})" for name, count in self.applied)


def rewrite_program(text: str, rewrites: Sequence[str], what: str) -> RewrittenProgram:
    """`text` after `rewrites` (names of `REWRITES`); unchanged text when none of them applies."""
    if not rewrites:
        return RewrittenProgram(text)
    unknown = [n for n in rewrites if n not in REWRITES]
    if unknown:
        raise AnsorError(f"{what}: unknown program rewrite {unknown[0]}: choose from {rewrite_choices()}")
    try:
        module = parse_module(text, what, new_context(allow_unregistered=True))
    except AnsorError:
        return RewrittenProgram(text)  # what reads the program next says what is wrong with it
    applied = tuple((name, count) for name, count in ((n, REWRITES[n](module)) for n in rewrites) if count)
    if not applied:
        return RewrittenProgram(text)
    try:
        module.operation.verify()
    except ir.MLIRError as exc:
        raise AnsorError(f"{what}: rewrite {'+'.join(n for n, _ in applied)} made invalid IR "
                         f"({str(exc).splitlines()[0]}): rerun with rewrites=none and report it") from None
    return RewrittenProgram(module.operation.get_asm(assume_verified=True), applied)

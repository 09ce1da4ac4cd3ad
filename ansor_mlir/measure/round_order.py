"""The order in which alternated contenders run in each round.

Alternating contenders round by round makes a host phase hit all of them
alike, but a fixed order still favours one side: on a host that drifts (slows
or speeds up over the run) the contender that always runs second sees a
little more of the drift in every round, enough to decide a comparison of a
program with itself (measured: docs/reports/measurement_fidelity.md).
Reversing the order every other round (ABBA) cancels a linear drift and
gives every contender each neighbour.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def round_order(contenders: Sequence[T], round_index: int) -> list[T]:
    """The contenders in their given order on even rounds, reversed on odd ones."""
    return list(contenders) if round_index % 2 == 0 else list(reversed(contenders))

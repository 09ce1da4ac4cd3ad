"""Calls of a compiled IREE function at the runtime's own cost, for timing.

`iree.runtime`'s function invoker converts every argument and wraps every
result in Python on each call, which costs more than a small program's whole
call through the VM (measured: docs/reports/measurement_fidelity.md). TVM's
and PyTorch's calls cost far less, so timing through the invoker charges an IREE program
for the binding rather than for itself, and hides differences between
candidates of small tasks. A prepared call builds the argument list once and
invokes the VM function directly; the program still allocates its outputs on
every call, as it does in any deployment. Outputs are read through the
invoker, which is only needed once. The call (`mlir.vm_invoke.bound_call`,
which also passes the fences of a program built for threads > 1) reads the
invoker's and the device array's private fields (iree-base-runtime 3.13);
`test_measure` checks the prepared call against the invoker, so a runtime that
renames them fails there.

Calls rotate over several placements of the inputs (`placements`): where the
operands sit moves a kernel's time (`run_worker` says how much).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ansor_mlir.mlir.runtime_device import release_free_blocks
from ansor_mlir.mlir.vm_invoke import bound_call

if TYPE_CHECKING:
    from ansor_mlir.mlir.iree_module import CompiledModel

# Copies of the inputs at distinct addresses that timed calls rotate over, unless they are this large.
PLACEMENTS = 4
MAX_PLACED_BYTES = 256 * 1024 * 1024


def placements(device, inputs: list[np.ndarray]) -> list[list]:
    """Several device copies of the inputs (all kept alive, so each sits at its own address), made after the
    device's allocator has returned its cached free blocks (`runtime_device.release_free_blocks`: a full free list
    would zero-fill the timed program's outputs on every call)."""
    release_free_blocks(device)
    count = PLACEMENTS if sum(x.nbytes for x in inputs) * PLACEMENTS <= MAX_PLACED_BYTES else 1
    import iree.runtime as rt

    return [[rt.asdevicearray(device, x) for x in inputs] for _ in range(count)]


def prepared_call(fn, args: Sequence, device=None) -> Callable[[], object]:
    """A zero-argument call of `fn` (an `iree.runtime` bound function) on device arrays `args`, returning its
    results list (`mlir.vm_invoke.bound_call`: an asynchronous function is waited for with a yielding poll)."""
    return bound_call(fn, args, device)


def prepared_calls(fn, placements: Sequence[Sequence], device=None) -> list[Callable[[], object]]:
    """One prepared call per placement of the inputs (`placements`)."""
    return [prepared_call(fn, args, device) for args in placements]


@dataclass
class PlacedCalls:
    """Prepared calls of one program, one per placement of its inputs; a call runs the current placement.

    `advance` moves to the next placement, once per timing round (`ansor_bench.timing.time_alternately`), as
    `compare.time_alternately` and the runner's comparisons do: within a round the inputs stay where they are,
    warm in cache as a library's inputs are when it is called in a loop, and across rounds no program wins by
    its buffers' addresses. Rotating on every call instead keeps a memory-bound program's inputs out of cache
    and reads it slower than a library called on one array (measured: docs/reports/measurement_fidelity.md).
    """

    calls: list[Callable[[], object]]
    index: int = 0

    def __call__(self) -> object:
        return self.calls[self.index]()

    def advance(self) -> None:
        self.index = (self.index + 1) % len(self.calls)


def timed_call(program: CompiledModel, inputs: Sequence) -> PlacedCalls:
    """A zero-argument call of a `CompiledModel` for timing: its inputs placed on its device once (several
    copies, one per timing round) and each call invoking the VM directly.

    `program(x)` copies every input in and every output out on each call, which is the binding's cost, not
    the program's; for a memory-bound program the copies take about as long as its kernel
    (measured: docs/reports/measurement_fidelity.md).
    """
    device, function = program.bound()
    arrays = [np.asarray(x, order="C") for x in inputs]
    return PlacedCalls(prepared_calls(function, placements(device, arrays), device))

"""Calls of a compiled IREE function at the runtime's own cost, for timing.

`iree.runtime`'s function invoker converts every argument and wraps every
result in Python on each call: about 3 us on a Zen 4 core (a 16-element add
takes 5.6 us through it, 2.4 us through the VM directly). TVM's and PyTorch's
calls cost far less, so timing through the invoker charges an IREE program
for the binding rather than for itself, and hides differences between
candidates of small tasks. A prepared call builds the argument list once and
invokes the VM function directly; the program still allocates its outputs on
every call, as it does in any deployment. Outputs are read through the
invoker, which is only needed once. It reads the invoker's and the device
array's private fields (iree-base-runtime 3.13); `test_measure` checks the
prepared call against the invoker, so a runtime that renames them fails there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


def prepared_call(fn, args: Sequence) -> Callable[[], object]:
    """A zero-argument call of `fn` (an `iree.runtime` bound function) on device arrays `args`."""
    import iree.runtime as rt

    context, function = fn._vm_context, fn.vm_function
    arg_list = rt.VmVariantList(len(args))
    for array in args:
        arg_list.push_ref(array._buffer_view)
    capacity = max(1, len(fn._ret_descs or ()))

    def call() -> object:
        results = rt.VmVariantList(capacity)
        context.invoke(function, arg_list, results)
        return results

    return call


def prepared_calls(fn, placements: Sequence[Sequence]) -> list[Callable[[], object]]:
    """One prepared call per placement of the inputs (see `run_worker.placements`)."""
    return [prepared_call(fn, args) for args in placements]


@dataclass
class PlacedCalls:
    """Prepared calls of one program, one per placement of its inputs; a call runs the current placement.

    `advance` moves to the next placement, once per timing round (`ansor_bench.timing.time_alternately`), as
    `compare.time_alternately` and the runner's comparisons do: within a round the inputs stay where they are,
    warm in cache as a library's inputs are when it is called in a loop, and across rounds no program wins by
    its buffers' addresses. Rotating on every call instead kept a memory-bound program's inputs out of cache
    (Zen 3, the suite's depthwise conv: 0.53 ms against 0.40 ms on one placement).
    """

    calls: list[Callable[[], object]]
    index: int = 0

    def __call__(self) -> object:
        return self.calls[self.index]()

    def advance(self) -> None:
        self.index = (self.index + 1) % len(self.calls)

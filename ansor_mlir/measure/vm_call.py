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

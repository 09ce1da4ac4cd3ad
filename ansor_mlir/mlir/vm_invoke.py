"""Calls of a compiled IREE function through the VM, for either of IREE's function ABIs.

A program built for threads > 1 has IREE's asynchronous ABI (`Target.compile_flags`):
it takes a wait and a signal fence and returns once its work is queued. Its
call then waits with a poll that yields the vCPU, not with IREE's own wait,
which burns the calling thread while the task workers need its core: on a
2-vCPU guest that makes rare calls stall for milliseconds and raises the
mean call well above the median (measured: docs/reports/caller_wait.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

# `iree.abi.model` of a function compiled with `--iree-execution-model=async-external`.
ASYNC_ABI = "coarse-fences"


def is_async(fn) -> bool:
    """Whether `fn` (an `iree.runtime` bound function) takes IREE's wait and signal fences."""
    return fn.vm_function.reflection.get("iree.abi.model") == ASYNC_ABI


def module_is_async(vmfb: bytes, function: str) -> bool:
    """Whether `function` of a compiled module takes fences, read from the module alone: no device is made, so a
    caller can pick the device the program runs on before loading it."""
    import iree.runtime as rt

    instance = rt.VmInstance()  # held while the module lives: a module outliving its instance crashes
    module = rt.VmModule.copy_buffer(instance, vmfb)
    found = module.lookup_function(function)
    return found is not None and found.reflection.get("iree.abi.model") == ASYNC_ABI


def bound_call(fn, args: Sequence, device=None) -> Callable[[], object]:
    """A zero-argument call of `fn` (an `iree.runtime` bound function) on device arrays `args`, returning its
    results list; an asynchronous function is waited for (`await_fence`) on `device` (default: the first
    argument's)."""
    import iree.runtime as rt

    if is_async(fn):
        return fenced_call(fn, args, device if device is not None else args[0]._device)
    context, function, capacity = fn._vm_context, fn.vm_function, _result_capacity(fn)
    arg_list = rt.VmVariantList(len(args))
    for array in args:
        arg_list.push_ref(array._buffer_view)

    def call() -> object:
        results = rt.VmVariantList(capacity)
        context.invoke(function, arg_list, results)
        return results

    return call


def await_fence(fence) -> None:
    """Wait for `fence`, yielding this thread's CPU between polls to the workers that signal it (raises if the
    work failed)."""
    while not fence.wait(timeout=0):
        os.sched_yield()


def fenced_call(fn, args: Sequence, device, waiter: Callable[[object], None] = await_fence) -> Callable[[], object]:
    """The call of an asynchronous function on device arrays `args`: each call waits on the last one's signal,
    signals the next, and waits for it with `waiter` (`tools/caller_wait_report.py` compares IREE's own)."""
    import iree.runtime as rt

    context, function, capacity = fn._vm_context, fn.vm_function, _result_capacity(fn)
    semaphore, last = device.create_semaphore(0), [0]

    def call() -> object:
        value = last[0]
        last[0] = value + 1
        arg_list = rt.VmVariantList(len(args) + 2)
        for array in args:
            arg_list.push_ref(array._buffer_view)
        wait, signal = rt.HalFence(1), rt.HalFence(1)
        wait.insert(semaphore, value)
        signal.insert(semaphore, value + 1)
        arg_list.push_ref(wait)
        arg_list.push_ref(signal)
        results = rt.VmVariantList(capacity)
        context.invoke(function, arg_list, results)
        waiter(signal)
        return results

    return call


def _result_capacity(fn) -> int:
    return max(1, len(fn._ret_descs or ()))


def call_outputs(fn, device, inputs: Sequence) -> tuple:
    """One call of `fn` on `inputs` (numpy arrays or device arrays) on `device`: its results, as the
    `iree.runtime` function invoker returns them (device arrays), for either ABI."""
    import iree.runtime as rt

    if not is_async(fn):
        result = fn(*inputs)
        return result if isinstance(result, tuple) else (result,)
    args = [x if isinstance(x, rt.DeviceArray) else rt.asdevicearray(device, np.asarray(x)) for x in inputs]
    results = bound_call(fn, args, device)()
    return tuple(rt.DeviceArray(device, results.get_as_ref(i).deref(rt.HalBufferView)) for i in range(len(results)))

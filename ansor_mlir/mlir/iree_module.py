"""A compiled IREE program and a small callable around it: what `ansor_mlir.compile` returns.

    program = ansor_mlir.compile(model, target="llvm-cpu", log="L.jsonl")
    outputs = program(x)                 # numpy in, numpy out
    program.save("model.vmfb")           # iree-run-module --module=model.vmfb --function=main_graph

The VM module is kept as bytes, so it can be saved, sent elsewhere or loaded
again; the runtime context is made on the first call and reused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ansor_mlir.errors import AnsorError
from ansor_mlir.mlir.runtime_device import runtime_config
from ansor_mlir.mlir.vm_invoke import call_outputs


@dataclass(frozen=True)
class CompiledModel:
    """A runnable IREE module: `vmfb` bytes and the function a call runs.

    `device` is IREE's runtime device: `local-sync` runs on the calling thread,
    `local-task` on IREE's worker threads.
    """

    vmfb: bytes
    function: str
    device: str = "local-sync"
    # Weights the program reads at run time (`--parameters=scope=...`): empty when they are embedded.
    parameters: bytes = field(default=b"", repr=False)
    scope: str = "model"

    def __call__(self, *inputs: Any) -> np.ndarray | tuple[np.ndarray, ...]:
        """Run the function on numpy arrays (or anything `np.asarray` takes, torch tensors included)."""
        arrays = [np.asarray(x, order="C") for x in inputs]  # not ascontiguousarray: it makes scalars 1-d
        config, function = self._runtime
        outputs = call_outputs(function, config.device, arrays)
        host = tuple(np.asarray(o.to_host()) for o in outputs)
        return host[0] if len(host) == 1 else host

    def bound(self) -> tuple[Any, Any]:
        """The runtime device the program runs on and its bound function, for callers that time it
        (`measure.vm_call.timed_call`)."""
        config, function = self._runtime
        return config.device, function

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        try:
            path.write_bytes(self.vmfb)
        except OSError as exc:
            raise AnsorError(f"{path}: cannot write the compiled program: {exc}") from None
        return path

    @cached_property
    def _runtime(self) -> tuple[Any, Any]:
        """The runtime's config (its device) and the bound function, made on first use."""
        import iree.runtime as rt

        config = runtime_config(self.device)
        modules = []
        if self.parameters:
            index = rt.ParameterIndex()
            index.load_from_file_handle(rt.FileHandle.wrap_memory(self.parameters), "irpa")
            modules.append(rt.create_io_parameters_module(config.vm_instance, index.create_provider(scope=self.scope)))
        program = rt.VmModule.copy_buffer(config.vm_instance, self.vmfb)
        context = rt.SystemContext(vm_modules=[*modules, program], config=config)
        try:
            return config, context.modules[program.name][self.function]
        except KeyError:
            raise AnsorError(f"the compiled program has no function {self.function}") from None


def outputs_match(outputs: Sequence[np.ndarray], expected: Sequence[np.ndarray], rtol: float, atol: float) -> bool:
    """Same shapes, and every value within `atol + rtol * |expected|` (NaNs where expected has them)."""
    if len(outputs) != len(expected):
        return False
    for out, ref in zip(outputs, expected, strict=True):
        out, ref = np.asarray(out), np.asarray(ref)
        if out.shape != ref.shape:
            return False
        if not np.allclose(out.astype(np.float64), ref.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True):
            return False
    return True

"""The program's entry point: the public function a user calls, and the tensor types it takes.

Whole-program verification builds and runs the user's module, so it needs
what to call and what to pass, read through the bindings' types.
"""

from __future__ import annotations

from dataclasses import dataclass

from iree.compiler import ir

from ansor_mlir.errors import AnsorError
from ansor_mlir.mlir.context import new_context, parse_module


@dataclass(frozen=True)
class EntryPoint:
    name: str
    input_types: tuple[str, ...]


def entry_point(text: str, what: str) -> EntryPoint:
    """The module's first public `func.func` with static tensor arguments."""
    module = parse_module(text, what, new_context())
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func" or "sym_visibility" in op.attributes:
            continue
        ftype = op.attributes["function_type"].value
        types = []
        for arg in ftype.inputs:
            if not isinstance(arg, ir.RankedTensorType) or not arg.has_static_shape:
                raise AnsorError(f"{what}: entry function argument of type {arg} is not a static tensor; "
                                 "whole-program verification needs static tensor arguments")
            types.append(str(arg))
        return EntryPoint(op.attributes["sym_name"].value, tuple(types))
    raise AnsorError(f"{what}: no public func.func to call: whole-program verification needs an entry function")

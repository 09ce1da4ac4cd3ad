"""The data programs are measured on: fixed-seed inputs of every element type IREE programs take.

Inputs are sized before anything is allocated: a task whose inputs need more
than `MAX_INPUT_BYTES` (2 GiB; the runner keeps copies of them, and of the
reference outputs) is refused with its shapes named, never handed to numpy.
Element types numpy lacks (bf16, the f8/f6/f4 variants, i2, i4) come from
`ml_dtypes`; types IREE's Python runtime cannot pass to a program (it maps no
HAL element type for i2, i4, f4, f6 and some f8 variants) are refused before
measuring, since no measurement could run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

import ml_dtypes
import numpy as np

from ansor_mlir.errors import AnsorError
from ansor_mlir.measure.arrays import decode_array, encode_array, is_floating
from ansor_mlir.mlir.context import argument_shape

__all__ = ["MAX_INPUT_BYTES", "decode_array", "encode_array", "make_arrays", "make_inputs", "check_inputs"]

MAX_INPUT_BYTES = 2 * 1024**3

# MLIR element type -> numpy dtype, for every element type a tensor argument of an IREE program can have.
ELEMENT_DTYPES: dict[str, np.dtype] = {
    name: np.dtype(dtype)
    for name, dtype in {
        "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
        "f8E4M3FN": ml_dtypes.float8_e4m3fn, "f8E4M3FNUZ": ml_dtypes.float8_e4m3fnuz, "f8E5M2": ml_dtypes.float8_e5m2,
        "f8E5M2FNUZ": ml_dtypes.float8_e5m2fnuz, "f8E4M3": ml_dtypes.float8_e4m3, "f8E3M4": ml_dtypes.float8_e3m4,
        "f8E4M3B11FNUZ": ml_dtypes.float8_e4m3b11fnuz, "f8E8M0FNU": ml_dtypes.float8_e8m0fnu,
        "f4E2M1FN": ml_dtypes.float4_e2m1fn, "f6E2M3FN": ml_dtypes.float6_e2m3fn, "f6E3M2FN": ml_dtypes.float6_e3m2fn,
        "i1": np.bool_, "i2": ml_dtypes.int2, "i4": ml_dtypes.int4, "i8": np.int8, "i16": np.int16,
        "i32": np.int32, "i64": np.int64, "si8": np.int8, "si16": np.int16, "si32": np.int32, "si64": np.int64,
        "ui2": ml_dtypes.uint2, "ui4": ml_dtypes.uint4, "ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32,
        "ui64": np.uint64, "complex<f32>": np.complex64, "complex<f64>": np.complex128,
    }.items()
}


@dataclass(frozen=True)
class ArgumentSpec:
    """One argument's shape and element type, read from its MLIR type."""

    type_text: str
    shape: tuple[int, ...]
    element: str
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return prod(self.shape) * self.dtype.itemsize


def argument_spec(type_text: str, what: str) -> ArgumentSpec:
    try:
        shape, element = argument_shape(type_text)
    except ValueError as exc:
        raise AnsorError(f"{what}: argument {type_text}: {exc}") from None
    dtype = ELEMENT_DTYPES.get(element)
    if dtype is None:
        raise AnsorError(f"{what}: argument {type_text}: element type {element} has no array type to generate "
                         f"inputs with (supported: {', '.join(ELEMENT_DTYPES)})")
    return ArgumentSpec(type_text, tuple(shape), element, dtype)


def check_inputs(types: Sequence[str], what: str, max_bytes: int = MAX_INPUT_BYTES,
                 runtime: bool = True) -> list[ArgumentSpec]:
    """The arguments' specs once they are known to fit in `max_bytes` and (with `runtime`) to be passable to
    a program by IREE's Python runtime; an `AnsorError` naming the arguments otherwise."""
    specs = [argument_spec(t, what) for t in types]
    total = sum(s.nbytes for s in specs)
    if total > max_bytes:
        raise AnsorError(f"{what}: its inputs ({', '.join(s.type_text for s in specs)}) need {_size(total)}, over "
                         f"the {_size(max_bytes)} this tuner allocates for a measurement "
                         "(ansor_mlir.measure.inputs.MAX_INPUT_BYTES): tune a smaller instance of the workload")
    if runtime:
        for spec in specs:
            if not runtime_passes(spec.dtype):
                raise AnsorError(f"{what}: argument {spec.type_text}: IREE's Python runtime cannot pass {spec.element} "
                                 "buffers to a program (it maps no HAL element type for them), so no candidate "
                                 "can be measured: tune a variant with i8/f16/bf16/f32 arguments")
    return specs


def runtime_passes(dtype: np.dtype) -> bool:
    from iree.runtime.dtypes import map_dtype_to_hal_element_type

    return map_dtype_to_hal_element_type(dtype) is not None


def _size(nbytes: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if nbytes < 1024 or unit == "PiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.2f} {unit}"
        nbytes /= 1024
    return f"{nbytes} B"


def make_inputs(task, seed: int) -> list[np.ndarray]:
    """Fixed-seed random inputs for a task (same task and seed, same data)."""
    return make_arrays(task.input_types, f"{task.key}:{seed}", what=f"task {task.name}")


def make_arrays(types: Sequence[str], key: str, what: str = "inputs",
                max_bytes: int = MAX_INPUT_BYTES) -> list[np.ndarray]:
    """Random arrays of the given MLIR types (tensors or scalars), seeded by `key` (same key, same data).

    Floats are drawn in [-1, 1) (unsigned float types: [0.5, 2)), integers in
    [-4, 4] clipped to the type's range, booleans at random. Sized first: over
    `max_bytes` in all is an `AnsorError`, before anything is allocated.
    """
    specs = check_inputs(types, what, max_bytes, runtime=False)
    digest = hashlib.sha256(key.encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    return [_random_array(spec, rng) for spec in specs]


def _random_array(spec: ArgumentSpec, rng: np.random.Generator) -> np.ndarray:
    shape, dtype = spec.shape, spec.dtype
    if dtype == np.float64:
        return rng.uniform(-1.0, 1.0, size=shape)
    if np.issubdtype(dtype, np.complexfloating):
        return (_uniform(rng, shape, -1.0, 1.0) + 1j * _uniform(rng, shape, -1.0, 1.0)).astype(dtype)
    if is_floating(dtype):
        signed = float(ml_dtypes.finfo(dtype).min) < 0
        return _uniform(rng, shape, -1.0 if signed else 0.5, 1.0 if signed else 2.0).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape, dtype=np.int8).astype(np.bool_)
    info = ml_dtypes.iinfo(dtype)
    low, high = max(-4, int(info.min)), min(4, int(info.max))
    return rng.integers(low, high + 1, size=shape, dtype=np.int8).astype(dtype)


def _uniform(rng: np.random.Generator, shape: tuple[int, ...], low: float, high: float) -> np.ndarray:
    """Uniform float32 in [low, high), scaled in place (no float64 copy of a large input)."""
    values = rng.random(shape, dtype=np.float32)
    values *= high - low
    values += low
    return values

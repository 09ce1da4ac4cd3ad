"""The data programs are measured on: fixed-seed inputs, and arrays as `.npy` bytes for the wire."""

from __future__ import annotations

import hashlib
import io

import numpy as np

from ansor_mlir.core.task import Task


def encode_array(array: np.ndarray) -> bytes:
    """`.npy` bytes: shape and element type travel with the data, and any numpy reads them."""
    buffer = io.BytesIO()
    # `np.asarray(order="C")`, not `ascontiguousarray`, which turns a 0-d array (a scalar tensor) into 1-d.
    np.save(buffer, np.asarray(array, order="C"), allow_pickle=False)
    return buffer.getvalue()


def decode_array(data: bytes) -> np.ndarray:
    return np.load(io.BytesIO(data), allow_pickle=False)


def make_inputs(task: Task, seed: int) -> list[np.ndarray]:
    """Fixed-seed random inputs for a task (same task and seed, same data)."""
    return make_arrays(task.input_types, f"{task.key}:{seed}")


def make_arrays(types: tuple[str, ...] | list[str], key: str) -> list[np.ndarray]:
    """Random arrays of the given tensor types, seeded by `key` (same key, same data)."""
    digest = hashlib.sha256(key.encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    arrays = []
    for ttype in types:
        inner = ttype[len("tensor<"):-1].split("x")
        shape, elem = [int(d) for d in inner[:-1]], inner[-1]
        if elem.startswith("f") or elem == "bf16":
            dtype = {"f16": np.float16, "f64": np.float64}.get(elem, np.float32)
            arrays.append(rng.uniform(-1.0, 1.0, size=shape).astype(dtype))
        else:
            dtype = {"i8": np.int8, "i16": np.int16, "i64": np.int64, "i1": np.bool_}.get(elem, np.int32)
            arrays.append(rng.integers(-4, 5, size=shape).astype(dtype))
    return arrays

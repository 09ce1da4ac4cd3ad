"""Arrays on the wire: `.npy` bytes that keep every element type IREE programs take, `ml_dtypes` ones included.

numpy writes an `ml_dtypes` array (bfloat16, the float8 variants, int4) as
anonymous bytes (`<V2`), so it would read back as raw bytes. Here the header
names the type (`'descr': 'bfloat16'`), which `np.load` reads back in any
process that imported `ml_dtypes`, as this module does. Numpy only: the timing
worker imports it.
"""

from __future__ import annotations

import io
from typing import BinaryIO

import ml_dtypes
import numpy as np

# The element types `ml_dtypes` adds to numpy, by numpy name.
ML_DTYPES = {
    np.dtype(t).name: np.dtype(t)
    for t in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2,
              ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e4m3, ml_dtypes.float8_e3m4, ml_dtypes.float8_e4m3b11fnuz,
              ml_dtypes.float8_e8m0fnu, ml_dtypes.float4_e2m1fn, ml_dtypes.float6_e2m3fn, ml_dtypes.float6_e3m2fn,
              ml_dtypes.int2, ml_dtypes.int4, ml_dtypes.uint2, ml_dtypes.uint4)
}


def is_floating(dtype: np.dtype) -> bool:
    """numpy's floats and `ml_dtypes`' (which numpy does not count as floating)."""
    dtype = np.dtype(dtype)
    return np.issubdtype(dtype, np.floating) or (dtype.name in ML_DTYPES and dtype.name.startswith(("float", "bf")))


def write_array(file: BinaryIO, array: np.ndarray) -> None:
    array = np.asarray(array, order="C")
    if array.dtype.name not in ML_DTYPES:
        np.save(file, array, allow_pickle=False)
        return
    header = {"descr": array.dtype.name, "fortran_order": False, "shape": array.shape}
    np.lib.format.write_array_header_1_0(file, header)
    file.write(array.tobytes(order="C"))


def encode_array(array: np.ndarray) -> bytes:
    """`.npy` bytes: shape and element type travel with the data, and any numpy reads them."""
    buffer = io.BytesIO()
    write_array(buffer, array)
    return buffer.getvalue()


def decode_array(data: bytes) -> np.ndarray:
    return np.load(io.BytesIO(data), allow_pickle=False)


def save_array(path: str, array: np.ndarray) -> None:
    with open(path, "wb") as f:
        write_array(f, array)

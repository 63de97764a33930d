"""Strict parsing of untrusted ``.npy`` bytes for the graders (trusted side).

A candidate's output arrays come back as ``.npy`` bytes it fully controls. :func:`parse_npy` checks the
header against an :class:`ArraySpec` (dtype kind and item size, dimensions exact or within bounds, C order,
declared data length equal to the bytes present) before building the array from the bytes received, so a
header declaring terabytes allocates nothing. Object, structured, complex and long-double arrays are
refused; anything wrong raises :class:`ValueError` naming the array.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import numpy as np
from numpy.lib import format as npy_format

Dim = int | tuple[int, int]
"""One dimension of an :class:`ArraySpec`: an exact size, or inclusive ``(low, high)`` bounds."""

_KIND_WORDS = {"b": "bool", "i": "integer", "u": "integer", "f": "float"}
_MAX_HEADER = 10_000


@dataclass(frozen=True)
class ArraySpec:
    """What one output array must look like."""

    name: str
    """Name used in error messages (e.g. ``"phy2log"``)."""
    kinds: str
    """Accepted numpy dtype kinds: ``"b"`` bool, ``"i"`` / ``"u"`` integers, ``"f"`` floats."""
    shape: tuple[Dim, ...]
    """Expected shape; each entry an exact size or inclusive ``(low, high)`` bounds."""
    max_itemsize: int = 8
    """Largest accepted item size in bytes (8 refuses ``float128`` / long double)."""

    def describe_shape(self) -> str:
        """:attr:`shape` as error messages show it, e.g. ``"(8, 1..64)"``."""
        parts = [str(d) if isinstance(d, int) else f"{d[0]}..{d[1]}" for d in self.shape]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"

    def describe_kind(self) -> str:
        """:attr:`kinds` as error messages show them, e.g. ``"integer or float"``."""
        return " or ".join(dict.fromkeys(_KIND_WORDS.get(k, k) for k in self.kinds))


def parse_npy(data: object, spec: ArraySpec) -> np.ndarray:
    """The array in ``data`` (``.npy`` bytes) if it matches ``spec``.

    It is a fresh, writable, C-ordered, native-endian copy (bool arrays normalised to 0/1).

    Raises:
        ValueError: ``data`` is not ``.npy`` bytes of an array matching ``spec`` (the message
            says why); nothing is allocated beyond the bytes given before the header is checked.
    """
    name = spec.name
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ValueError(f"{name} is not .npy bytes")
    data = bytes(data)
    fh = io.BytesIO(data)
    try:
        version = npy_format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = npy_format.read_array_header_1_0(fh, max_header_size=_MAX_HEADER)
        elif version == (2, 0):
            shape, fortran, dtype = npy_format.read_array_header_2_0(fh, max_header_size=_MAX_HEADER)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    except Exception as exc:  # noqa: BLE001 - numpy raises several types for a malformed header
        raise ValueError(f"{name} is not a valid .npy array "
                         f"({type(exc).__name__}: {str(exc)[:120]})") from None
    offset = fh.tell()
    if (not isinstance(dtype, np.dtype) or dtype.hasobject or dtype.fields is not None
            or dtype.subdtype is not None):
        raise ValueError(f"{name} must be a plain {spec.describe_kind()} array, got dtype {str(dtype)[:60]}")
    if dtype.kind not in spec.kinds:
        kind = spec.describe_kind()
        raise ValueError(f"{name} must be {'an' if kind[0] in 'aeiou' else 'a'} {kind} array, got {dtype}")
    if dtype.itemsize > spec.max_itemsize:
        raise ValueError(f"{name} has {dtype.itemsize}-byte items ({dtype}); at most {spec.max_itemsize} "
                         "bytes per item are accepted (no long double)")
    if fortran is not False:
        raise ValueError(f"{name} must be stored in C order")
    if not (isinstance(shape, tuple) and all(type(d) is int and d >= 0 for d in shape)):
        raise ValueError(f"{name} has a malformed shape")
    shape_text = "(" + ", ".join(map(str, shape[:8])) + ("," if len(shape) == 1 else "") + \
                 (", ..." if len(shape) > 8 else "") + ")"
    if len(shape) != len(spec.shape) or not all(_fits(d, want) for d, want in zip(shape, spec.shape)):
        raise ValueError(f"{name} has shape {shape_text}, expected {spec.describe_shape()}")
    count = math.prod(shape)
    if len(data) - offset != count * dtype.itemsize:
        raise ValueError(f"{name}: its header declares {count * dtype.itemsize} bytes of data but "
                         f"{len(data) - offset} follow")
    flat = np.frombuffer(data, dtype=dtype, count=count, offset=offset)
    if dtype.kind == "b":
        return (flat.view(np.uint8) != 0).reshape(shape)
    return flat.astype(dtype.newbyteorder("="), copy=True).reshape(shape)


def _fits(size: int, want: Dim) -> bool:
    if isinstance(want, int):
        return size == want
    low, high = want
    return low <= size <= high


def npy_bytes(array: np.ndarray) -> bytes:
    """``array`` as ``.npy`` bytes (C order, no pickles) — for building inputs and tests."""
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()

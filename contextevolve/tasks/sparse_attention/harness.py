"""Untrusted side of sparse attention: one ``select_keys`` call per request (one captured layer).

Runs in the sandbox's runner process, next to the candidate (which can replace any of it:
the grader trusts nothing here but checks the output). Imports only numpy (a returned
torch tensor is converted through its own methods, inside the call). Nothing here times
anything, and exceptions propagate (the call fails). The grader computes density and
error itself from the returned mask and weights.
"""

from __future__ import annotations

import io

import numpy as np

INPUTS = ("queries", "keys", "values", "query_positions")
"""The layer's inputs, in the order ``select_keys`` takes them; each arrives as ``<name>.npy``."""


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


def select(candidate, args, blobs: dict) -> tuple[dict, dict]:  # noqa: ARG001 - no JSON inputs
    """Call ``candidate.select_keys`` on one layer.

    Blobs: ``queries.npy`` [H, Q, d] float32, ``keys.npy`` / ``values.npy`` [Hkv, T, d] float32,
    ``query_positions.npy`` [Q] int64 (this layer only). Returns ``({}, {"mask.npy"[, "weights.npy"]})``,
    or ``({"bad": why}, {})`` when the mask or the weights are not arrays.
    """
    inputs = [np.load(io.BytesIO(blobs[f"{name}.npy"]), allow_pickle=False) for name in INPUTS]
    value = candidate.select_keys(*inputs)
    mask, weights = value if isinstance(value, tuple) and len(value) == 2 else (value, None)
    out = {}
    for name, arr in (("mask", mask), ("weights", weights)):
        if arr is None and name == "weights":
            continue
        if hasattr(arr, "detach"):  # a torch tensor
            arr = arr.detach().cpu().numpy()
        if not isinstance(arr, np.ndarray) or arr.dtype.hasobject:
            what = f"an array of {arr.dtype}" if isinstance(arr, np.ndarray) else type(arr).__name__
            return {"bad": f"{name} is {what}, expected a numpy array"}, {}
        out[f"{name}.npy"] = _npy(arr)
    return {}, out

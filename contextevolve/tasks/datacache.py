"""On-disk cache of generated task data (``.npz`` files, written atomically).

Data generators are seeded and offline, but some are slow (capturing attention inputs
from a real LLM takes a minute or two), so their output is built on first use and
stored under ``$CONTEXTEVOLVE_DATA_DIR`` (default ``~/.cache/contextevolve/data``).
The file name carries a version key: change the generator, change the key.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np


def data_dir() -> Path:
    """Directory holding cached task data."""
    return Path(os.environ.get("CONTEXTEVOLVE_DATA_DIR") or Path.home() / ".cache" / "contextevolve" / "data")


def cached_arrays(task: str, key: str, build: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Arrays stored as ``<data_dir>/<task>/<key>.npz``, built with ``build()`` when absent.

    A corrupt or unreadable cache file is rebuilt. Object arrays are refused
    (``allow_pickle=False``), so only plain numeric and string arrays can be cached.

    Raises:
        whatever ``build`` raises; OSError when the cache directory cannot be written.
    """
    path = data_dir() / task / f"{key}.npz"
    if path.exists():
        try:
            with np.load(path, allow_pickle=False) as data:
                return {name: data[name] for name in data.files}
        except (OSError, ValueError, EOFError):
            path.unlink(missing_ok=True)
    arrays = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp.npz")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return arrays


def cached_json(task: str, key: str, build: Callable[[], object]) -> object:
    """Like :func:`cached_arrays` for JSON-able data (tables of strings), stored as ``<key>.json``."""
    path = data_dir() / task / f"{key}.json"
    if path.exists():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
    value = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp.json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(value, fh)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return value


def npy_bytes(array: np.ndarray) -> bytes:
    """``array`` serialised as a ``.npy`` file (no pickles), ready to hand to a candidate process."""
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()

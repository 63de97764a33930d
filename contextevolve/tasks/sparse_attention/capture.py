"""Capture attention inputs (Q, K, V) from the embedded causal LM over real text, once.

The embedded GGUF is loaded with transformers and reads ``NUM_TOKENS`` tokens
of standard-library docstrings (:func:`corpus_text`); the post-RoPE Q, K, V of ``LAYERS`` are kept for
the last ``NUM_QUERIES`` query positions (decoding-like queries over a long KV cache), all keys and
values. Run as ``python -m contextevolve.tasks.sparse_attention.capture OUT.npz``; it needs much
memory for a while, so :func:`attention_inputs` runs it in a child process and caches the arrays
(docs/tasks.md, *Sparse attention*).
"""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

import numpy as np

from contextevolve.tasks.datacache import cached_arrays, data_dir, npy_bytes

NUM_TOKENS = 2048
NUM_QUERIES = 128
LAYERS = (2, 13, 25)
VERSION = "v1"
TEXT_MODULES = ("argparse", "collections", "json", "subprocess", "logging", "unittest", "asyncio",
                "itertools", "functools", "pathlib", "typing", "dataclasses", "csv", "sqlite3", "threading")


class CaptureError(RuntimeError):
    """The attention inputs could not be captured (embedded model missing, out of memory, ...)."""


def corpus_text() -> str:
    """The real prose the LM reads: module, class and function docstrings of ``TEXT_MODULES``."""
    parts = []
    for name in TEXT_MODULES:
        module = importlib.import_module(name)
        parts.append(inspect.getdoc(module) or "")
        for attr in sorted(getattr(module, "__all__", []) or []):
            doc = inspect.getdoc(getattr(module, attr, None))
            if doc and len(doc) > 200:
                parts.append(doc)
    return "\n\n".join(p for p in parts if p)


def capture(out_path: Path) -> None:
    """Run the LM over the corpus and save the captured arrays to ``out_path``.

    They are ``queries [L, H, Q, d]``, ``keys``/``values [L, Hkv, T, d]`` (float32) and
    ``query_positions [Q]`` (int64).
    """
    import torch
    from transformers import AttentionInterface, AutoModelForCausalLM, AutoTokenizer
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from contextevolve.llm.embedded import ensure_model

    gguf = ensure_model()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    ids = tokenizer(corpus_text(), return_tensors="pt").input_ids[:, :NUM_TOKENS]
    if ids.shape[1] < NUM_TOKENS:
        raise CaptureError(f"corpus gives only {ids.shape[1]} tokens, need {NUM_TOKENS}")
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    captured: dict[int, tuple] = {}

    def recording_attention(module, query, key, value, attention_mask, **kwargs):
        if module.layer_idx in LAYERS:
            captured[module.layer_idx] = (query[0, :, -NUM_QUERIES:].clone(), key[0].clone(),
                                          value[0].clone())
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)

    AttentionInterface.register("contextevolve_capture", recording_attention)
    model.set_attn_implementation("contextevolve_capture")
    with torch.no_grad():
        model(ids)
    q, k, v = (np.stack([captured[layer][i].float().numpy() for layer in LAYERS]) for i in range(3))
    positions = np.arange(NUM_TOKENS - NUM_QUERIES, NUM_TOKENS, dtype=np.int64)
    np.savez(out_path, queries=q, keys=k, values=v, query_positions=positions)


def _build() -> dict[str, np.ndarray]:
    folder = data_dir() / "sparse_attention"
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=folder, prefix="capture-", suffix=".npz")
    os.close(fd)
    out = Path(name)
    proc = subprocess.run([sys.executable, "-m", __name__, str(out)], capture_output=True, text=True)
    if proc.returncode != 0 or not out.stat().st_size:
        out.unlink(missing_ok=True)
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise CaptureError("capturing attention inputs from the embedded LM failed "
                           f"(exit {proc.returncode}): {' | '.join(tail)}")
    try:
        with np.load(out, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    finally:
        out.unlink(missing_ok=True)


@cache
def attention_inputs() -> dict[str, np.ndarray]:
    """Cached captured inputs: ``queries``, ``keys``, ``values``, ``query_positions`` (read-only arrays).

    Raises:
        CaptureError: the first capture failed (e.g. the embedded model is not installed).
    """
    key = (f"{VERSION}-{'-'.join(map(str, LAYERS))}-{NUM_TOKENS}-{NUM_QUERIES}"
           f"-py{sys.version_info[0]}{sys.version_info[1]}")
    arrays = cached_arrays("sparse_attention", key, _build)
    for arr in arrays.values():
        arr.setflags(write=False)
    return arrays


@cache
def layer_files(layer: int) -> dict[str, bytes]:
    """The inputs of captured layer ``layer`` (index into ``LAYERS``) as ``<name>.npy`` bytes.

    For the candidate: its ``queries``, ``keys``, ``values`` and the shared ``query_positions``;
    serialised once per process.
    """
    data = attention_inputs()
    arrays = {"queries": data["queries"][layer], "keys": data["keys"][layer], "values": data["values"][layer],
              "query_positions": data["query_positions"]}
    return {f"{name}.npy": npy_bytes(arr) for name, arr in arrays.items()}


if __name__ == "__main__":
    capture(Path(sys.argv[1]))

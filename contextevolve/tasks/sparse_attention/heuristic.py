"""Sparse attention heuristic baseline: StreamingLLM (attention sink + sliding window, Xiao et al. 2024)."""

import numpy as np


def select_keys(queries, keys, values, query_positions):
    """Keep the first 4 keys and the 256 most recent ones for every head."""
    heads, num_q, _ = queries.shape
    num_t = keys.shape[1]
    t = np.arange(num_t)[None, :]
    pos = np.asarray(query_positions)[:, None]
    keep = (t <= pos) & ((t < 4) | (t > pos - 256))
    return np.broadcast_to(keep, (heads, num_q, num_t)).copy()

"""Sparse attention: choose, per head and query, a small set of keys that preserves the attention output."""

import math

import numpy as np

# EVOLVE-BLOCK-START


def select_keys(queries, keys, values, query_positions):
    """The vAttention-style selection: attention sink, local window, top-k heavy hitters and a sample.

    The attention sink + local window + top-k heavy hitters, plus a uniform sample of the remaining
    keys whose weights make the estimate of their share unbiased.

    Args:
        queries: [H, Q, d] float32.
        keys: [Hkv, T, d] float32 (head h uses KV head h // (H // Hkv)).
        values: [Hkv, T, d] float32.
        query_positions: [Q] int64; query i may attend keys 0..query_positions[i].

    Returns:
        (mask, weights): mask bool [H, Q, T] (True = key kept, no future keys); weights float32
        [H, Q, T], importance weight of each kept key (1 for deterministic keys, n_rest / n_sampled
        for sampled ones).
    """
    sink, window, top_fraction = 4, 64, 0.05
    epsilon, delta = 0.1, 0.1  # sample budget from a Hoeffding bound: n = ln(2/delta) / (2 epsilon^2)
    budget = math.ceil(math.log(2 / delta) / (2 * epsilon ** 2))
    heads, num_q, dim = queries.shape
    kv_heads, num_t, _ = keys.shape
    k = np.repeat(keys, heads // kv_heads, axis=0)
    scores = np.einsum("hqd,htd->hqt", queries, k) / math.sqrt(dim)
    mask = np.zeros((heads, num_q, num_t), dtype=bool)
    weights = np.ones((heads, num_q, num_t), dtype=np.float32)
    rng = np.random.default_rng(0)
    for i, pos in enumerate(query_positions):
        pos = int(pos)
        mask[:, i, :min(sink, pos + 1)] = True
        mask[:, i, max(0, pos - window + 1):pos + 1] = True
        middle = np.arange(sink, max(sink, pos - window + 1))
        if middle.size == 0:
            continue
        top = max(1, math.ceil(top_fraction * middle.size))
        heavy = np.argpartition(-scores[:, i, middle], top - 1, axis=1)[:, :top]
        for h in range(heads):
            mask[h, i, middle[heavy[h]]] = True
            rest = np.setdiff1d(middle, middle[heavy[h]], assume_unique=True)
            if rest.size == 0:
                continue
            n = min(budget, rest.size)
            sampled = rng.choice(rest, size=n, replace=False)
            mask[h, i, sampled] = True
            weights[h, i, sampled] = rest.size / n
    return mask, weights


# EVOLVE-BLOCK-END

"""Sparse attention, human state of the art: vAttention (Desai et al. 2025) with adaptive budgets.

Deterministic part: attention sink, local window, and the heaviest keys of the middle
until they cover a fraction ``tau`` of its softmax mass (top-p). Stochastic part: a
uniform sample of the remaining keys, sized so that the (epsilon, delta) Hoeffding
budget is scaled by the residual mass the sample has to estimate, with weights
n_rest / n_sampled so the estimate of the residual is unbiased.
"""

import math

import numpy as np


def select_keys(queries, keys, values, query_positions):
    """The vAttention rule: top-p heavy hitters and a residual-mass-scaled sample; returns (mask, weights)."""
    sink, window, tau = 4, 64, 0.75
    epsilon, delta = 0.05, 0.05
    full_budget = math.log(2 / delta) / (2 * epsilon ** 2)
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
        s = scores[:, i, :pos + 1]
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        for h in range(heads):
            pm = p[h, middle]
            order = np.argsort(-pm)
            cum = np.cumsum(pm[order])
            mass = cum[-1]
            n_heavy = int(np.searchsorted(cum, tau * mass)) + 1
            heavy = middle[order[:n_heavy]]
            mask[h, i, heavy] = True
            rest = middle[order[n_heavy:]]
            if rest.size == 0:
                continue
            residual = mass - cum[n_heavy - 1]
            n = min(rest.size, max(8, math.ceil(full_budget * residual)))
            sampled = rng.choice(rest, size=n, replace=False)
            mask[h, i, sampled] = True
            weights[h, i, sampled] = rest.size / n
    return mask, weights

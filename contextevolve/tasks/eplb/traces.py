"""Seeded, realistic expert-load traces for EPLB (58 MoE layers × 256 routed experts).

ADRS's recorded trace is not available offline, so one is generated with what makes rebalancing
hard: skewed per-layer expert popularity that drifts and bursts, routed as Poisson token counts.
``STEPS`` steps are summed into ``WINDOWS`` windows of ``STEPS // WINDOWS`` steps (ADRS sums 100
per window) and cached on disk after first use. The generator: docs/tasks.md, *Expert-parallel
load balancing* (Data).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from contextevolve.tasks.datacache import cached_arrays, npy_bytes

NUM_LAYERS, NUM_EXPERTS = 58, 256
NUM_REPLICAS, NUM_GROUPS, NUM_NODES, NUM_GPUS = 288, 8, 4, 32
STEPS, WINDOWS = 600, 6
TOKENS_PER_STEP = 4096 * 8
SEED = 2025
WARMUP_SEED = 7
VERSION = "v2"


def _generate() -> dict[str, np.ndarray]:
    rng = np.random.RandomState(SEED)
    s = rng.uniform(0.3, 0.8, size=(NUM_LAYERS, 1))
    ranks = np.argsort(rng.random_sample((NUM_LAYERS, NUM_EXPERTS)), axis=1) + 1
    base = -s * np.log(ranks)
    theta = base.copy()
    burst_left = np.zeros((NUM_LAYERS, NUM_EXPERTS), dtype=np.int64)
    burst_gain = np.ones((NUM_LAYERS, NUM_EXPERTS))
    per_window = STEPS // WINDOWS
    windows = np.zeros((WINDOWS, NUM_LAYERS, NUM_EXPERTS), dtype=np.int64)
    for step in range(STEPS):
        theta += 0.02 * (base - theta) + rng.normal(0.0, 0.05, size=theta.shape)
        start = (burst_left == 0) & (rng.random_sample(theta.shape) < 0.001)
        burst_left[start] = rng.geometric(1 / 25, size=int(start.sum()))
        burst_gain[start] = rng.uniform(1.5, 4.0, size=int(start.sum()))
        gain = np.where(burst_left > 0, burst_gain, 1.0)
        burst_left = np.maximum(burst_left - 1, 0)
        p = np.exp(theta) * gain
        p /= p.sum(axis=1, keepdims=True)
        windows[step // per_window] += rng.poisson(TOKENS_PER_STEP * p)
    return {"windows": windows}


@cache
def load_windows() -> np.ndarray:
    """Expert loads per window, int64 array ``[WINDOWS, NUM_LAYERS, NUM_EXPERTS]`` (tokens; read-only)."""
    arr = cached_arrays("eplb", f"{VERSION}-{SEED}", _generate)["windows"]
    arr.setflags(write=False)
    return arr


@cache
def window_npy(index: int) -> bytes:
    """Window ``index`` of :func:`load_windows` as ``.npy`` bytes (the only load one scored call gets)."""
    return npy_bytes(load_windows()[index])


@cache
def warmup_load() -> np.ndarray:
    """A synthetic load for the untimed, ungraded warm-up call, int64 ``[NUM_LAYERS, NUM_EXPERTS]``.

    Same shape and a similar skew as the windows but drawn from its own seed, so it is none
    of the scored windows (remembering its answer earns nothing). Read-only.
    """
    rng = np.random.default_rng(WARMUP_SEED)
    ranks = np.argsort(rng.random((NUM_LAYERS, NUM_EXPERTS)), axis=1) + 1
    p = ranks ** -rng.uniform(0.3, 0.8, size=(NUM_LAYERS, 1))
    load = rng.poisson(TOKENS_PER_STEP * (STEPS // WINDOWS) * p
                       / p.sum(axis=1, keepdims=True)).astype(np.int64)
    load.setflags(write=False)
    return load


@cache
def warmup_npy() -> bytes:
    """:func:`warmup_load` as ``.npy`` bytes."""
    return npy_bytes(warmup_load())

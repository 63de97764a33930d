"""Three seeded Transaction Scheduling workloads of 100 transactions with hot keys.

ADRS's recorded traces are not available offline, so these are generated with NumPy's
``RandomState`` (identical on every machine): Zipf-like key popularity, p(key k) ∝ 1 / (k + 1)^s,
and each operation a write with probability ``write_prob``; the three differ in skew, length and
write ratio (docs/tasks.md, *Transaction Scheduling*). Generation takes milliseconds, so the cache
is in-process.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np


class WorkloadSpec(NamedTuple):
    """Parameters of one generated workload."""

    name: str
    seed: int
    num_txns: int
    num_keys: int
    zipf_s: float
    write_prob: float
    min_len: int
    max_len: int


SPECS = (
    WorkloadSpec("oltp_mix", seed=101, num_txns=100, num_keys=400, zipf_s=1.0, write_prob=0.3,
                 min_len=4, max_len=12),
    WorkloadSpec("write_hotspot", seed=202, num_txns=100, num_keys=100, zipf_s=1.2, write_prob=0.5,
                 min_len=2, max_len=8),
    WorkloadSpec("long_reads", seed=303, num_txns=100, num_keys=1000, zipf_s=0.8, write_prob=0.15,
                 min_len=8, max_len=24),
)


@cache
def workloads() -> tuple[tuple[tuple[tuple[str, int], ...], ...], ...]:
    """The three workloads: per workload a tuple of transactions, each a tuple of ``(op, key)``."""
    out = []
    for spec in SPECS:
        rng = np.random.RandomState(spec.seed)
        weights = 1.0 / np.arange(1, spec.num_keys + 1) ** spec.zipf_s
        weights /= weights.sum()
        txns = []
        for _ in range(spec.num_txns):
            length = int(rng.randint(spec.min_len, spec.max_len + 1))
            keys = rng.choice(spec.num_keys, size=length, p=weights)
            writes = rng.random_sample(length) < spec.write_prob
            txns.append(tuple(("w" if w else "r", int(k)) for k, w in zip(keys, writes)))
        out.append(tuple(txns))
    return tuple(out)

"""The 50 Model Placement test cases of ADRS (facts from its public evaluator, docs/tasks.md).

NumPy's legacy global RNG seeded 42; per case ``gpu_num = randint(5, 10)``, then
``2 * gpu_num`` models each drawing ``model_size = randint(10, 30)`` GB,
``req_rate = randint(1, 10)`` and ``slo = randint(5, 10)`` in that order
(``randint`` upper bounds exclusive). We use a private ``RandomState(42)``, which
yields the same stream as ``np.random.seed(42)`` without touching global state.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np

GPU_MEM_SIZE_GB = 80
NUM_CASES = 50


class ModelSpec(NamedTuple):
    """One model to place: name, weights size (GB), request rate (req/s), SLO (s), current GPU id."""

    model_name: str
    model_size: int
    req_rate: int
    slo: int
    cur_gpu_id: int


class Case(NamedTuple):
    """One placement problem: ``gpu_num`` GPUs and the models to put on them."""

    gpu_num: int
    models: tuple[ModelSpec, ...]


@cache
def test_cases(num_cases: int = NUM_CASES, seed: int = 42) -> tuple[Case, ...]:
    """The ADRS MP cases, identical on every call (cached, immutable)."""
    rng = np.random.RandomState(seed)
    cases = []
    for _ in range(num_cases):
        gpu_num = int(rng.randint(5, 10))
        models = []
        for j in range(gpu_num * 2):
            size = int(rng.randint(10, 30))
            rate = int(rng.randint(1, 10))
            slo = int(rng.randint(5, 10))
            models.append(ModelSpec(f"model_{j}", size, rate, slo, j))
        cases.append(Case(gpu_num, tuple(models)))
    return tuple(cases)

"""Hit rate of a cache eviction policy on three synthetic access traces.

The program defines ``choose_victim(cache, stats, now)``, called on every miss of a full cache of
64 keys; it returns the key to evict. Traces (20,000 accesses each, fixed seeds): ``zipf`` (keys
drawn with Zipf-like popularity, exponent 0.9, over 1,000 keys), ``scan`` (a hot set of 40 keys
mixed with long sequential scans over 5,000 cold keys), ``shift`` (the popular keys change every
5,000 accesses). Metrics: the hit rate of each trace (higher is better); combined_score is their
mean. A victim that is not in the cache, or an exception, scores the run as an error.
"""

import importlib.util
import random

CAPACITY = 64
LENGTH = 20_000


def _zipf_trace(rng, keys=1000, exponent=0.9):
    weights = [1.0 / (rank + 1) ** exponent for rank in range(keys)]
    return rng.choices(range(keys), weights=weights, k=LENGTH)


def _scan_trace(rng):
    trace, cold = [], 10_000
    while len(trace) < LENGTH:
        if rng.random() < 0.02:
            start = rng.randrange(cold, cold + 5000)
            trace.extend(range(start, start + rng.randrange(20, 100)))
        else:
            trace.append(rng.randrange(40))
    return trace[:LENGTH]


def _shift_trace(rng):
    trace = []
    for phase in range(4):
        base = phase * 500
        weights = [1.0 / (rank + 1) for rank in range(400)]
        trace.extend(base + k for k in rng.choices(range(400), weights=weights, k=LENGTH // 4))
    return trace


TRACES = {"zipf": (_zipf_trace, 1), "scan": (_scan_trace, 2), "shift": (_shift_trace, 3)}


def hit_rate(choose_victim, trace):
    """Simulate a cache of CAPACITY keys under ``choose_victim``; return the fraction of hits."""
    cache, stats, hits = set(), {}, 0
    for now, key in enumerate(trace):
        if key in cache:
            hits += 1
            _, count, inserted = stats[key]
            stats[key] = (now, count + 1, inserted)
            continue
        if len(cache) >= CAPACITY:
            victim = choose_victim(set(cache), dict(stats), now)
            if victim not in cache:
                raise ValueError(f"choose_victim returned {victim!r}, which is not in the cache")
            cache.remove(victim)
            del stats[victim]
        cache.add(key)
        stats[key] = (now, 1, now)
    return hits / len(trace)


def evaluate(program_path):
    """Load the program at ``program_path`` and return its hit rates (dict of metrics)."""
    spec = importlib.util.spec_from_file_location("program", program_path)
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    metrics = {}
    try:
        for name, (make, seed) in TRACES.items():
            metrics[f"hit_rate_{name}"] = hit_rate(program.choose_victim, make(random.Random(seed)))
    except Exception as exc:  # noqa: BLE001 - reported as the program's error, as OpenEvolve evaluators do
        return {"combined_score": 0.0, "error": f"{type(exc).__name__}: {exc}"}
    metrics["combined_score"] = sum(metrics.values()) / len(metrics)
    return metrics

"""Cache eviction policy: which key leaves a full cache when a new key arrives.

Evolved by ContextEvolve (or OpenEvolve) against ``evaluator.py``; only the part between the
EVOLVE-BLOCK markers changes.
"""

# EVOLVE-BLOCK-START
def choose_victim(cache, stats, now):
    """Return the key to evict from the full ``cache``.

    Args:
        cache: set of the keys currently cached (its size is the capacity).
        stats: dict key -> (last_access, access_count, inserted_at) for every key in ``cache``;
            times are access indices, ``access_count`` counts hits since the key was inserted, plus 1.
        now: index of the current access (the missing key is being inserted).

    Returns:
        One key of ``cache``.
    """
    # FIFO: evict the key that has been in the cache longest
    return min(cache, key=lambda k: stats[k][2])
# EVOLVE-BLOCK-END

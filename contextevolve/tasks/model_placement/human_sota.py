"""Model placement, human state of the art: Prism-style min-max KVPR placement (Yu et al. 2025).

Binary search on the target maximum KV-cache pressure T: a target is feasible when a
best-fit pass (most demanding model first, each onto the GPU where its arrival keeps the
KVPR lowest while staying ≤ T and within memory) places every model. The placement of
the smallest feasible target found is returned; the plain greedy is the fallback.
"""

GPU_MEM_SIZE = 80


def _pack(gpu_num, models, target):
    placement = {g: [] for g in range(gpu_num)}
    free = [GPU_MEM_SIZE] * gpu_num
    load = [0.0] * gpu_num
    for m in sorted(models, key=lambda m: (m.req_rate / m.slo, m.model_size), reverse=True):
        best, best_kvpr = None, None
        for g in range(gpu_num):
            room = free[g] - m.model_size
            if room <= 0:
                continue
            kvpr = (load[g] + m.req_rate / m.slo) / room
            if kvpr <= target and (best_kvpr is None or kvpr < best_kvpr):
                best, best_kvpr = g, kvpr
        if best is None:
            return None
        placement[best].append(m)
        free[best] -= m.model_size
        load[best] += m.req_rate / m.slo
    return placement


def compute_model_placement(gpu_num, models):
    """Smallest target KVPR (binary search, 40 steps) whose best-fit packing places every model."""
    lo, hi = 0.0, sum(m.req_rate / m.slo for m in models)
    best = _pack(gpu_num, models, float("inf"))
    for _ in range(40):
        mid = (lo + hi) / 2
        placement = _pack(gpu_num, models, mid)
        if placement is None:
            lo = mid
        else:
            hi, best = mid, placement
    return best

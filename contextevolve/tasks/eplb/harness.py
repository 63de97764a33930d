"""Runs inside the candidate's child process: call ``rebalance_experts`` per window, time it, save the maps.

The load windows arrive as ``windows.npy`` (a private copy); the three returned tensors
of window ``i`` leave as ``phy2log_i.npy``, ``log2phy_i.npy`` and ``logcnt_i.npy`` (plain
integer arrays, no pickles). Only the rebalance call is timed.
"""

from __future__ import annotations

from time import perf_counter  # bound before the candidate is imported: patching time.perf_counter cannot fake speed

from contextevolve.evaluation.time_limit import CaseTimeout, time_limit


def output_names(i: int) -> tuple[str, str, str]:
    """Files holding the maps computed on window ``i``."""
    return f"phy2log_{i}.npy", f"log2phy_{i}.npy", f"logcnt_{i}.npy"


def run(candidate, payload: dict) -> dict:
    """Rebalance on every window but the last (after one untimed warm-up call).

    Payload: ``{"case_timeout_s": float, "num_replicas", "num_groups", "num_nodes", "num_gpus": int}``.
    Returns ``{"seconds": [s per window], "bad": str (only when an output is not a tensor triple)}``.
    """
    import numpy as np
    import torch

    fn = getattr(candidate, "rebalance_experts", None)
    if not callable(fn):
        raise AttributeError("the program defines no function rebalance_experts(weight, num_replicas, "
                             "num_groups, num_nodes, num_gpus)")
    windows = np.load("windows.npy", allow_pickle=False)
    args = (payload["num_replicas"], payload["num_groups"], payload["num_nodes"], payload["num_gpus"])
    seconds = []
    for i in range(-1, len(windows) - 1):
        weight = torch.from_numpy(windows[max(i, 0)].copy())
        try:
            with time_limit(payload["case_timeout_s"]):
                start = perf_counter()
                value = fn(weight, *args)
                elapsed = perf_counter() - start
        except CaseTimeout:
            raise TimeoutError(f"a rebalance call exceeded {payload['case_timeout_s']:g} s") from None
        if i < 0:
            continue  # warm-up
        seconds.append(elapsed)
        if not isinstance(value, (tuple, list)) or len(value) != 3:
            return {"seconds": seconds, "bad": f"returned {type(value).__name__}, expected (phy2log, log2phy, logcnt)"}
        for name, tensor in zip(output_names(i), value):
            if not isinstance(tensor, torch.Tensor):
                return {"seconds": seconds, "bad": f"{name[:-6]} is {type(tensor).__name__}, expected a torch tensor"}
            np.save(name, tensor.detach().cpu().numpy(), allow_pickle=False)
    return {"seconds": seconds}

"""Untrusted side of EPLB: one ``rebalance_experts`` call per request, its maps serialised.

Runs in the sandbox's runner process, next to the candidate (which can replace any of it:
the grader trusts nothing here but checks the output). Imports only numpy and torch
(torch at import, so its import cost is not part of any timed call). Nothing here times
anything — the supervisor times each call, including the conversion of the returned
tensors to ``.npy`` bytes done below (lazy work is counted) — and exceptions propagate
(the call fails).
"""

from __future__ import annotations

import io

import numpy as np
import torch

OUTPUTS = ("phy2log", "log2phy", "logcnt")
"""The three returned maps, in order; each leaves as ``<name>.npy``."""


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


def rebalance(candidate, args: dict, blobs: dict) -> tuple[dict, dict]:
    """Call ``candidate.rebalance_experts`` on one window of load.

    Args: ``{"num_replicas", "num_groups", "num_nodes", "num_gpus": int}``; blobs:
    ``{"weight.npy": int64 [layers, experts]}`` (this window only).
    Returns ``({}, {"phy2log.npy", "log2phy.npy", "logcnt.npy"})``, or ``({"bad": why}, {})``
    when the result is not a triple of torch tensors.
    """
    weight = torch.from_numpy(np.load(io.BytesIO(blobs["weight.npy"]), allow_pickle=False))
    value = candidate.rebalance_experts(weight, args["num_replicas"], args["num_groups"], args["num_nodes"],
                                        args["num_gpus"])
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        return {"bad": f"returned {type(value).__name__}, expected (phy2log, log2phy, logcnt)"}, {}
    out = {}
    for name, tensor in zip(OUTPUTS, value):
        if not isinstance(tensor, torch.Tensor):
            return {"bad": f"{name} is {type(tensor).__name__}, expected a torch tensor"}, {}
        out[f"{name}.npy"] = _npy(tensor.detach().cpu().numpy())
    return {}, out

"""Runs inside the candidate's child process: call ``select_keys`` per layer and save its mask (and weights).

Inputs arrive as private ``.npy`` copies; outputs leave as ``mask_<layer>.npy`` and, when
the candidate returns importance weights, ``weights_<layer>.npy``. The grader computes
density and error itself from these arrays.
"""

from __future__ import annotations

from contextevolve.evaluation.time_limit import CaseTimeout, time_limit


def output_names(layer: int) -> tuple[str, str]:
    """Files holding the mask and the optional weights chosen for captured layer ``layer``."""
    return f"mask_{layer}.npy", f"weights_{layer}.npy"


def run(candidate, payload: dict) -> dict:
    """Payload: ``{"case_timeout_s": float}``; inputs ``queries.npy``, ``keys.npy``, ``values.npy``,
    ``query_positions.npy``. Returns ``{"layers": n, "weights": [bool per layer]}`` or ``{"bad": why}``."""
    import numpy as np

    fn = getattr(candidate, "select_keys", None)
    if not callable(fn):
        raise AttributeError("the program defines no function select_keys(queries, keys, values, query_positions)")
    q, k, v, pos = (np.load(f"{n}.npy", allow_pickle=False) for n in ("queries", "keys", "values", "query_positions"))
    has_weights = []
    for layer in range(q.shape[0]):
        try:
            with time_limit(payload["case_timeout_s"]):
                value = fn(q[layer].copy(), k[layer].copy(), v[layer].copy(), pos.copy())
        except CaseTimeout:
            raise TimeoutError(f"select_keys exceeded {payload['case_timeout_s']:g} s on one layer") from None
        mask, weights = (value if isinstance(value, tuple) and len(value) == 2 else (value, None))
        mask_name, weights_name = output_names(layer)
        for name, arr in ((mask_name, mask), (weights_name, weights)):
            if arr is None:
                continue
            if hasattr(arr, "detach"):  # a torch tensor
                arr = arr.detach().cpu().numpy()
            if not isinstance(arr, np.ndarray):
                return {"bad": f"{name[:-6]} is {type(arr).__name__}, expected a numpy array"}
            np.save(name, arr, allow_pickle=False)
        has_weights.append(weights is not None)
    return {"layers": int(q.shape[0]), "weights": has_weights}

"""Untrusted side of Model Placement: build ``Model`` objects, call the candidate, serialise.

Runs in the sandbox's runner process, next to the candidate (which can replace any of it:
the grader trusts nothing here but checks the output). Only stdlib imports. The output
names each placed object by its index in the case's model list (or ``-1`` with a
description when the object is not one of the models handed in), so the trusted grader
never sees a live candidate object.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Model:
    """A model to place, as the ADRS contract passes it to ``compute_model_placement``."""

    model_name: str
    model_size: int
    req_rate: int
    slo: int
    cur_gpu_id: int


def _describe(obj) -> str:
    return f"{type(obj).__name__} {str(obj)[:60]}"


def place(candidate, args: dict, blobs: dict) -> tuple[dict, dict]:  # noqa: ARG001 - no binary inputs
    """Call ``candidate.compute_model_placement`` on one case (timed by the supervisor, not here).

    Args: ``{"gpu_num": int, "models": [[name, size, rate, slo, cur], ...]}``.
    Returns ``({"placement": [[gpu_key, key_is_int, [index | -1, ...], [bad object descriptions]], ...]}
    | {"not_a_dict": type name}, {})``; exceptions propagate (the call fails).
    """
    models = [Model(*m) for m in args["models"]]
    index_of = {id(m): i for i, m in enumerate(models)}
    placement = candidate.compute_model_placement(args["gpu_num"], list(models))
    if not isinstance(placement, dict):
        return {"not_a_dict": type(placement).__name__}, {}
    rows = []
    for key, items in placement.items():
        key_is_int = type(key) is int
        try:
            objs = list(items)
        except TypeError:
            objs = [items]
        idx = [index_of.get(id(o), -1) for o in objs]
        bad = [_describe(o) for o, i in zip(objs, idx) if i < 0][:3]
        rows.append([key if key_is_int else repr(key)[:40], key_is_int, idx, bad])
    return {"placement": rows}, {}

"""Runs inside the candidate's child process: build ``Model`` objects, call the candidate, serialise.

Only stdlib imports. The output names each placed object by its index in the
case's model list (or ``-1`` with a description when the object is not one of the
models handed in), so the trusted grader never sees a live candidate object.
"""

from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter  # bound before the candidate is imported: patching time.perf_counter cannot fake speed

from contextevolve.evaluation.time_limit import CaseTimeout, time_limit


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


def run(candidate, payload: dict) -> dict:
    """Call ``candidate.compute_model_placement`` on every case of ``payload``.

    Payload: ``{"case_timeout_s": float, "cases": [{"gpu_num": int, "models": [[name, size, rate, slo, cur], ...]}]}``.
    Returns ``{"cases": [{"ok": True, "seconds": s, "placement": [[gpu_key, key_is_int, [index | -1, ...], [bad object descriptions]], ...]} | {"ok": False, "error": str}]}``.
    """
    fn = getattr(candidate, "compute_model_placement", None)
    if not callable(fn):
        raise AttributeError("the program defines no function compute_model_placement(gpu_num, models)")
    out = []
    for case in payload["cases"]:
        models = [Model(*m) for m in case["models"]]
        index_of = {id(m): i for i, m in enumerate(models)}
        start = perf_counter()
        try:
            with time_limit(payload["case_timeout_s"]):
                placement = fn(case["gpu_num"], list(models))
        except CaseTimeout:
            out.append({"ok": False, "error": f"exceeded {payload['case_timeout_s']:g} s"})
            continue
        except Exception as exc:  # noqa: BLE001 - the candidate's failure, recorded per case
            out.append({"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
            continue
        seconds = perf_counter() - start
        if not isinstance(placement, dict):
            out.append({"ok": True, "seconds": seconds, "not_a_dict": type(placement).__name__})
            continue
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
        out.append({"ok": True, "seconds": seconds, "placement": rows})
    return {"cases": out}

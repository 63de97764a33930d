"""Untrusted side of a user's problem: run the user's ``evaluator.py`` on the candidate, serialise metrics.

Runs in the sandbox's runner next to the candidate, which the user's evaluator imports in this same
process; imports only the stdlib. The evaluator is loaded from the read-only staged problem folder
(:data:`STAGED`), first on ``sys.path``. Cascade as in OpenEvolve: stage *k+1* runs only when the
score so far reaches threshold *k*; stages' metrics merge, later ones winning (docs/own-problem.md,
*The evaluator contract*). The grader (:mod:`contextevolve.tasks.problem.task`) re-checks it all.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from pathlib import Path

STAGED = "ce_problem"
"""Folder of the problem's files beside this package in the sandbox's ``lib`` (read-only)."""
FOLDER = Path(__file__).resolve().parents[3] / STAGED
if os.environ.get("CONTEXTEVOLVE_SANDBOX") and FOLDER.is_dir():
    # in the sandbox (its token is set), before the runner imports the candidate, which may import the
    # problem's own modules; imported on the host for STAGED only, it changes nothing there
    sys.path.insert(0, str(FOLDER))
MAX_STAGES = 3
"""OpenEvolve runs at most ``evaluate_stage1`` .. ``evaluate_stage3``."""
MAX_METRICS = 64
MAX_TEXT = 2000
"""Characters kept of one artifact or non-numeric metric (the grader caps the total again)."""


def _load(folder: Path, filename: str):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("evaluator", folder / filename)
    module = importlib.util.module_from_spec(spec)
    sys.modules["evaluator"] = module
    spec.loader.exec_module(module)
    return module


def _number(value):
    """``value`` as a float when it is a real number (numpy scalars included), else None.

    A bool is not a number here (OpenEvolve leaves flags out of its scores too).
    """
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return None
    if isinstance(value, (int, float)):
        return float(value)
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__.startswith("numpy"):
        try:
            out = item()
        except Exception:  # noqa: BLE001 - an array of several values is not a metric
            return None
        return float(out) if isinstance(out, (int, float)) else None
    return None


def _text(value) -> str:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = value if isinstance(value, str) else repr(value)
    return text[:MAX_TEXT]


def _parts(result) -> tuple[dict, dict]:
    """(metrics, artifacts) of an evaluator's return value.

    The value is a dict, or an object with ``.metrics`` (and ``.artifacts``) such as OpenEvolve's
    ``EvaluationResult``.
    """
    if isinstance(result, dict):
        return result, {}
    metrics = getattr(result, "metrics", None)
    if isinstance(metrics, dict):
        artifacts = getattr(result, "artifacts", None)
        return metrics, artifacts if isinstance(artifacts, dict) else {}
    raise TypeError(f"the evaluator returned {type(result).__name__}, expected a dict of metrics "
                    "or an object with .metrics (OpenEvolve's EvaluationResult)")


def _score(metrics: dict) -> float:
    """OpenEvolve's threshold value: ``combined_score`` when numeric, else the mean of the numeric metrics."""
    combined = _number(metrics.get("combined_score"))
    if combined is not None:
        return combined
    values = [v for k, v in ((k, _number(m)) for k, m in metrics.items())
              if k != "error" and v is not None and math.isfinite(v)]
    return sum(values) / len(values) if values else 0.0


def _cascade(module, program: str, thresholds: list) -> tuple[dict, dict, int]:
    metrics, artifacts = _parts(module.evaluate_stage1(program))
    merged_m, merged_a, stages = dict(metrics), dict(artifacts), 1
    for k, threshold in enumerate(thresholds[:MAX_STAGES - 1], start=2):
        stage = getattr(module, f"evaluate_stage{k}", None)
        if not callable(stage) or _score(merged_m) < float(threshold):
            break
        try:
            metrics, artifacts = _parts(stage(program))
        except Exception as exc:  # noqa: BLE001 - as OpenEvolve: the earlier stages' result stands
            merged_a[f"stage{k}_error"] = f"{type(exc).__name__}: {exc}"
            break
        merged_m.update(metrics)
        merged_a.update(artifacts)
        stages = k
    return merged_m, merged_a, stages


def evaluate(candidate, args: dict, blobs: dict) -> tuple[dict, dict]:  # noqa: ARG001 - no binary inputs
    """Run the user's evaluator on the candidate's file.

    Args: ``{"evaluator": str (file in the staged folder), "cascade": bool, "thresholds": [float]}``.
    Returns ``({"metrics": {name: float | "nan" | "inf" | "-inf"}, "text": {name: str}, "stages": int}, {})``:
    numbers as floats (non-finite ones as strings, which JSON cannot carry), every other metric value
    and every artifact as capped text.
    """
    module = _load(FOLDER, args["evaluator"])
    program = getattr(candidate, "__file__", None) or os.path.join(os.getcwd(), "candidate.py")
    if args.get("cascade") and callable(getattr(module, "evaluate_stage1", None)):
        metrics, artifacts, stages = _cascade(module, program, list(args.get("thresholds") or []))
    else:
        if not callable(getattr(module, "evaluate", None)):
            raise AttributeError("the evaluator defines no function evaluate(program_path)")
        metrics, artifacts = _parts(module.evaluate(program))
        stages = 0
    numbers, text = {}, {}
    for name, value in list(metrics.items())[:MAX_METRICS]:
        number = _number(value)
        if number is None:
            text[str(name)[:100]] = _text(value)
        else:
            numbers[str(name)[:100]] = number if math.isfinite(number) else str(number)
    for name, value in list(artifacts.items())[:MAX_METRICS]:
        text[str(name)[:100]] = _text(value)
    return {"metrics": numbers, "text": text, "stages": stages}, {}

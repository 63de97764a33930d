"""The live view of a ``contextevolve compare`` folder: every system's curves side by side (paper Fig. 3).

Read from what the comparison writes while it runs: each run's ledger (``<system>-s<seed>/ledger.jsonl``,
a line per evaluation, ours) and the proxy's ``requests.jsonl`` (a line per LLM request); the finished
runs' rows from ``results.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

from contextevolve.compare import ledger
from contextevolve.tasks.registry import get_task


def _task_name(out: Path) -> str | None:
    """The comparison's task: from ``results.json``, else from a run's spec or run settings."""
    if (out / "results.json").is_file():
        return json.loads((out / "results.json").read_text()).get("settings", {}).get("task")
    for path in sorted(out.glob("*/spec.json")) + sorted(out.glob("*/run/run.json")):
        try:
            return json.loads(path.read_text())["task"]
        except (ValueError, KeyError):
            continue
    return None


def _requests(out: Path) -> dict[str, list[dict]]:
    """The proxy's records by run label, in the order they were written."""
    by_label: dict[str, list[dict]] = {}
    path = out / "requests.jsonl"
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:  # a line being written
                continue
            by_label.setdefault(record.get("label", ""), []).append(record)
    return by_label


def payload(out: Path) -> dict:
    """Every run of the comparison in ``out``: its best so far and tokens by candidate, live.

    Returns a dict with ``task`` (name, title, ``higher_is_better``; ``None`` before any run has started),
    ``runs`` (per label: ``system``, ``seed``, ``initial``, ``best_so_far`` and ``tokens`` after each
    candidate, ``evaluated``, ``valid``, ``requests``, ``total_tokens``, ``finished``) and ``results``
    (the rows of ``results.json``, finished runs).
    """
    name = _task_name(out)
    task = get_task(name) if name else None
    results = json.loads((out / "results.json").read_text()).get("results", []) if (
        out / "results.json").is_file() else []
    finished = {r["label"]: r for r in results}
    requests = _requests(out)
    runs = []
    for path in sorted(out.glob("*/ledger.jsonl")):
        label = path.parent.name
        every = ledger.read_ledger(path)
        entries = [e for e in every if e.candidate]
        initial = next((e.combined_score for e in every if e.index == 0 and e.status == "ok"), None)
        calls = sorted((r.get("started", 0) + r.get("seconds", 0), r.get("prompt_tokens", 0)
                        + r.get("completion_tokens", 0)) for r in requests.get(label, []))
        best, best_so_far, tokens = initial, [], []
        for entry in entries:
            if entry.status == "ok" and (best is None or task is None
                                         or task.better(entry.combined_score, best)):
                best = entry.combined_score
            best_so_far.append(best)
            tokens.append(sum(t for end, t in calls if end <= entry.finished))
        if label in finished and finished[label].get("cumulative_tokens"):
            tokens = finished[label]["cumulative_tokens"]  # ContextEvolve's own per-child records
        system, _, seed = label.rpartition("-s")
        runs.append({"label": label, "system": system, "seed": seed, "initial": initial,
                     "best_so_far": best_so_far,
                     "tokens": tokens, "evaluated": len(entries),
                     "valid": sum(e.status == "ok" for e in entries), "requests": len(calls),
                     "total_tokens": sum(t for _, t in calls), "finished": label in finished})
    return {"task": {"name": name, "title": task.title, "higher_is_better": task.higher_is_better}
            if task else None, "runs": runs, "results": results, "out": str(out)}

"""The live view of a ``contextevolve compare`` folder: every system's curves side by side (paper Fig. 3).

Read from what the comparison writes while it runs: each peer run's ledger (``<system>-s<seed>/ledger.jsonl``,
a line per evaluation, ours), a ContextEvolve run's own buffer while it runs (its ledger is written at its
end), the proxy's ``requests.jsonl`` (a line per LLM request); the finished runs' rows from
``results.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

from contextevolve.compare import ledger
from contextevolve.roles import total_tokens
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


def _from_run(run_dir: Path) -> tuple[list[ledger.LedgerEntry], list[int]]:
    """A running ContextEvolve run's committed programs as ledger entries, and its tokens after each child.

    Both are empty while nothing is committed (or the buffer is being created).
    """
    from contextevolve.memory.buffer import EvolveBuffer

    try:
        buffer = EvolveBuffer(run_dir / "buffer.sqlite", read_only=True)
    except Exception:  # noqa: BLE001 - a buffer being created: nothing to show yet
        return [], []
    try:
        programs = sorted(buffer.committed(), key=lambda p: p.iteration)
    finally:
        buffer.close()
    entries, tokens, used = [], [], 0
    for p in programs:
        used += total_tokens(p.tokens)
        entries.append(ledger.LedgerEntry(index=p.iteration, candidate=p.iteration > 0, status=p.status,
                                          combined_score=p.combined_score, source_sha256=""))
        if p.iteration > 0:
            tokens.append(used)
    return entries, tokens


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
    folders = ({p.parent for p in out.glob("*/ledger.jsonl")}
               | {p.parent.parent for p in out.glob("*/run/buffer.sqlite")})
    for folder in sorted(folders):
        label = folder.name
        own_tokens = None
        if (folder / "ledger.jsonl").is_file():
            every = ledger.read_ledger(folder / "ledger.jsonl")
        else:  # ContextEvolve's ledger is written when its run ends
            every, own_tokens = _from_run(folder / "run")
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
        elif own_tokens is not None:
            tokens = own_tokens
        system, _, seed = label.rpartition("-s")
        runs.append({"label": label, "system": system, "seed": seed, "initial": initial,
                     "best_so_far": best_so_far,
                     "tokens": tokens, "evaluated": len(entries),
                     "valid": sum(e.status == "ok" for e in entries), "requests": len(calls),
                     "total_tokens": sum(t for _, t in calls), "finished": label in finished})
    return {"task": {"name": name, "title": task.title, "higher_is_better": task.higher_is_better}
            if task else None, "runs": runs, "results": results, "out": str(out)}

"""The trusted record of every candidate a system in a comparison had evaluated.

:func:`evaluate` wraps the sandboxed :meth:`Task.evaluate` all systems score with and appends a
:class:`LedgerEntry` per call to a JSON-lines ledger (whole lines under an ``flock``: OpenEvolve evaluates
from worker processes); best, valid and changed candidates are read from it. *Changed*: its
:func:`contextevolve.program.twins.normalized_code` differs from the initial program's and every earlier
candidate's. Entry 0 is the initial program; a peer's own evaluation of it has ``candidate=False``.
ContextEvolve's ledger is written from its stored children (:func:`record`; a child's repairs are part of
it). Protocol: docs/compare.md.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import time
from pathlib import Path

from pydantic import BaseModel

from contextevolve.program.twins import normalized_code
from contextevolve.tasks.base import Evaluation, Task


class LedgerEntry(BaseModel):
    """One evaluation of one candidate."""

    index: int
    """0 for the initial program, then 1, 2, ... in the order the evaluations finished."""
    candidate: bool = True
    """False for the initial program and a system's own evaluation of it (not a proposal)."""
    status: str
    """The evaluator's status (``ok``, ``invalid``, ``failed``, ``timeout``)."""
    combined_score: float
    """The task's combined score as our evaluator computed it (the task's worst when not ok)."""
    reason: str = ""
    """Why the status is not ok."""
    code_digest: str | None = None
    """Normalised-code digest (None: does not parse)."""
    source_sha256: str
    """SHA-256 of the exact source evaluated."""
    changed: bool = False
    """The normalised code differs from the initial program's and every earlier entry's."""
    seconds: float = 0.0
    """Wall seconds of the evaluation."""
    finished: float = 0.0
    """Unix time the evaluation finished."""


def _entries(path: Path) -> list[LedgerEntry]:
    if not path.exists():
        return []
    return [LedgerEntry.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]


def read_ledger(path: Path) -> list[LedgerEntry]:
    """All entries of the ledger at ``path`` (empty when it does not exist), index order."""
    return sorted(_entries(Path(path)), key=lambda e: e.index)


def evaluate(task: Task, source: str, ledger: Path, *, initial: bool = False) -> Evaluation:
    """Score ``source`` with ``task.evaluate`` (sandboxed) and append the verdict to ``ledger``.

    Args:
        task: the task whose evaluator scores the candidate.
        source: the candidate program (untrusted; any text).
        ledger: JSON-lines file, created with its folder when missing.
        initial: this is the initial program (index 0, not a candidate).

    Returns:
        The :class:`Evaluation`; a candidate that is not text, or is empty, is ``failed``.
    """
    source = source if isinstance(source, str) else ""
    result = task.evaluate(source) if source.strip() else task.rejected("failed", "empty candidate")
    record(task, source, result.status, result.combined_score, ledger, reason=result.reason,
           seconds=result.seconds, initial=initial)
    return result


def record(task: Task, source: str, status: str, combined_score: float, ledger: Path, *, reason: str = "",
           seconds: float = 0.0, initial: bool = False) -> LedgerEntry:
    """Append one verdict on ``source`` to ``ledger`` (see :func:`evaluate`) and return its entry."""
    digest = normalized_code(source, task.job().entry or None)
    sha = hashlib.sha256(source.encode()).hexdigest()
    ledger = Path(ledger)
    ledger.parent.mkdir(parents=True, exist_ok=True)
    program = source_path(ledger, sha)
    if not program.exists():
        program.parent.mkdir(exist_ok=True)
        program.write_text(source)
    with ledger.open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            handle.seek(0)
            earlier = [LedgerEntry.model_validate_json(line) for line in handle.read().splitlines()
                       if line.strip()]
            first = next((e for e in earlier if e.index == 0), None)
            seed_copy = (not initial and first is not None and sha == first.source_sha256
                         and not any(e.source_sha256 == sha for e in earlier if e.index > 0))
            entry = LedgerEntry(
                index=0 if initial else max([e.index for e in earlier] + [0]) + 1,
                candidate=not initial and not seed_copy,
                status=status, combined_score=combined_score, reason=reason[:300], code_digest=digest,
                source_sha256=sha, changed=not initial and digest is not None and digest not in
                {e.code_digest for e in earlier},
                seconds=round(seconds, 3), finished=time.time())
            handle.write(entry.model_dump_json() + "\n")
            handle.flush()
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    return entry


def source_path(ledger: Path, sha256: str) -> Path:
    """Where the ledger at ``ledger`` keeps the source with this SHA-256 (``programs/<sha>.py``)."""
    return Path(ledger).parent / "programs" / f"{sha256[:16]}.py"


def best_entry(entries: list[LedgerEntry], task: Task) -> LedgerEntry | None:
    """The first entry with the best ok score (the initial program when nothing beat it)."""
    best = None
    for entry in sorted(entries, key=lambda e: e.index):
        if entry.status == "ok" and (best is None or task.better(entry.combined_score, best.combined_score)):
            best = entry
    return best


def summary(entries: list[LedgerEntry], task: Task) -> dict:
    """Best score and counts of a ledger.

    Returns ``{"initial", "best", "candidates", "valid", "valid_changed", "valid_new_score",
    "best_so_far"}``; ``best_so_far[i]`` is the best score after candidate i+1 (the initial program's score
    before any), oriented by the task and its score tolerance. ``valid_new_score`` counts the valid
    candidates whose score differs by more than the task's :attr:`~Task.score_tolerance` from every earlier
    valid entry's, the initial program included: a candidate that computed something new, as far as a score
    can tell (two programs can behave differently and score the same, so it is a lower bound on
    behaviourally new candidates; a task whose score has a timing term would count every copy otherwise).
    """
    initial = next((e.combined_score for e in entries if e.index == 0), None)
    best = initial
    curve = []
    seen = [e.combined_score for e in entries if e.index == 0 and e.status == "ok"]
    new_scores = 0
    candidates = [e for e in entries if e.candidate]
    for entry in candidates:
        if entry.status == "ok" and (best is None or task.better(entry.combined_score, best)):
            best = entry.combined_score
        if entry.status == "ok" and all(abs(entry.combined_score - s) > task.score_tolerance for s in seen):
            new_scores += 1
        if entry.status == "ok":
            seen.append(entry.combined_score)
        curve.append(best)
    return {"initial": initial, "best": best, "candidates": len(candidates),
            "valid": sum(e.status == "ok" for e in candidates),
            "valid_changed": sum(e.status == "ok" and e.changed for e in candidates),
            "valid_new_score": new_scores, "best_so_far": curve}


def dumps(entries: list[LedgerEntry]) -> str:
    """The entries as a JSON array (for reports)."""
    return json.dumps([e.model_dump() for e in entries], indent=2)

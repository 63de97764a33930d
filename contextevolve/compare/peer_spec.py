"""What a peer system in ``contextevolve compare`` is given, and how our evaluation is shown to it.

:class:`PeerSpec` is written as JSON by the comparison and read by the peer's process. Every peer scores
candidates only through :func:`contextevolve.compare.ledger.evaluate`, told the combined score
:func:`oriented` so that higher is better (the ledger keeps the task's units) and our diagnostics as text
(:func:`feedback`); every peer gets the same task text (:func:`system_message`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from pydantic import BaseModel

from contextevolve.tasks.base import Evaluation, Task

SPEC_ENV = "CONTEXTEVOLVE_COMPARE_SPEC"
"""Environment variable naming the spec file, for OpenEvolve's evaluator in its worker processes."""


class PeerSpec(BaseModel):
    """What a peer system runs on; written as JSON by the comparison, read by this module."""

    system: str
    """The runner: ``openevolve``, ``gepa``, ``shinka``, ``adaevolve`` or ``evox``."""
    task: str
    """Registered task name."""
    out_dir: str
    """The system's own output folder."""
    ledger: str
    """The trusted ledger of its evaluations (JSON lines)."""
    base_url: str
    """OpenAI base URL (the counting proxy's, for this system and seed)."""
    model: str
    """Model name sent with each request."""
    candidates: int
    """Candidate budget: the peer's iterations, proposals or generations."""
    seed: int = 0
    """Seed of the system's own randomness."""
    temperature: float = 0.8
    """Sampling temperature of every request."""
    max_tokens: int = 1400
    """Completion-token cap of every request."""
    timeout_s: float = 600.0
    """Limit for one LLM request, seconds."""
    workers: int = 1
    """OpenEvolve's worker processes (its ``evaluator.parallel_evaluations``: each runs whole iterations,
    the LLM request included)."""
    options: dict = {}
    """Entries merged into the system's own configuration (OpenEvolve's ``Config`` dict), e.g.
    ``{"diff_based_evolution": False}`` for the ``openevolve-full`` variant."""


FAILED_SCORE = -1e18
"""What the peers are told a program that is not ``ok`` scored: below any real score (a user's problem
stores failures at 0, which may beat valid negative or, when minimised, positive scores)."""


def oriented(task: Task, evaluation: Evaluation) -> float:
    """The evaluation's combined score with higher = better, as every peer maximises.

    A program that is not ``ok`` gets :data:`FAILED_SCORE`.
    """
    if evaluation.status != "ok":
        return FAILED_SCORE
    return evaluation.combined_score if task.higher_is_better else -evaluation.combined_score


def feedback(evaluation: Evaluation) -> dict[str, str]:
    """Our evaluator's diagnostics as text fields for an LLM (artifacts / side information)."""
    info = {"status": evaluation.status, "combined_score": f"{evaluation.combined_score:.6g}",
            "metrics": json.dumps({k: round(v, 6) for k, v in evaluation.metrics.items()})}
    for name in ("reason", "diagnostics", "traceback"):
        if getattr(evaluation, name):
            info[name] = getattr(evaluation, name)[:2000]
    return info


def spec_from_env() -> PeerSpec:
    """The spec named by :data:`SPEC_ENV` (the evaluators of peers that evaluate in other processes).

    Raises:
        RuntimeError: the variable is not set (not inside a comparison).
    """
    path = os.environ.get(SPEC_ENV)
    if not path:
        raise RuntimeError(f"{SPEC_ENV} is not set: this evaluator only runs inside a comparison")
    return PeerSpec.model_validate_json(Path(path).read_text())


def system_message(task: Task) -> str:
    """The task description both peers get (OpenEvolve's system message, GEPA's background)."""
    goal = "higher" if task.higher_is_better else "lower"
    return (f"You are an expert in systems algorithms improving a program.\n\n## Task\n{task.description}\n\n"
            f"The program's combined score should be {goal}. Keep the entry function's name and signature.")


def score_file(spec: PeerSpec, program_path: str, clean=None) -> tuple[Task, Evaluation]:
    """Score the candidate a peer wrote to ``program_path`` into ``spec``'s ledger.

    ``clean(source, initial_program) -> source`` undoes what the harness added for the peer (ShinkaEvolve's
    markers). An unreadable file is an empty candidate (``failed``), said on stderr.
    """
    from contextevolve.compare import ledger
    from contextevolve.tasks.registry import get_task

    task = get_task(spec.task)
    try:
        source = Path(program_path).read_text(errors="replace")
    except OSError as exc:
        source = ""
        print(f"contextevolve compare: cannot read {program_path}: {exc}", file=sys.stderr)
    if clean is not None:
        source = clean(source, task.initial_program)
    return task, ledger.evaluate(task, source, Path(spec.ledger))


def peer_metrics(task: Task, evaluation: Evaluation) -> dict[str, float]:
    """``combined_score`` (:func:`oriented`) and the task's metrics as ``metric_<name>``."""
    metrics = {"combined_score": oriented(task, evaluation)}
    metrics.update({f"metric_{k}": float(v) for k, v in evaluation.metrics.items()})
    return metrics


def feedback_text(evaluation: Evaluation) -> str:
    """:func:`feedback` as ``key: value`` lines, for peers that take one text."""
    return "\n".join(f"{key}: {value}" for key, value in feedback(evaluation).items())

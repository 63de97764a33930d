"""What one evaluation asks of a candidate: the harness, the entry function and the calls.

Built by a task (:meth:`contextevolve.tasks.base.Task.job`) from its trusted inputs and
carried to the sandbox's supervisor as one ``job`` frame
(:mod:`contextevolve.evaluation.protocol`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Call(BaseModel):
    """One request to the candidate: ``harness.<fn>(candidate, args, blobs) -> (value, out_blobs)``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    fn: str
    """Name of the harness function that converts the inputs, calls the candidate and serialises its
    output."""
    args: Any = None
    """JSON-able inputs of this call."""
    blobs: dict[str, bytes] = Field(default_factory=dict)
    """Binary inputs (e.g. ``.npy`` bytes) of this call; sent with the request, never before."""
    timeout_s: float = Field(gt=0)
    """Wall-clock limit of this call, seconds, enforced by the supervisor (the runner is killed)."""


class EvalJob(BaseModel):
    """Everything the sandbox of one evaluation receives (all of it copies of trusted inputs)."""

    harness: str
    """Module run next to the candidate (untrusted side), e.g. ``contextevolve.tasks.eplb.harness``."""
    entry: str
    """Function the candidate must define (checked right after import); empty: none is checked (a user's
    evaluator decides what it calls)."""
    calls: list[Call]
    """The calls, run in order, each timed by the supervisor."""
    modules: list[str] = Field(default_factory=list)
    """Other ``contextevolve`` modules the harness imports (staged next to it; nothing else of the
    package — data generators, graders — is visible to the candidate)."""
    files: dict[str, bytes] = Field(default_factory=dict)
    """Other files staged read-only beside the harness, by relative path (a user's problem folder:
    its evaluator, helper modules and data)."""

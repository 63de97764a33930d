"""The task interface: what ContextEvolve needs to know about a problem it evolves code for.

A task bundles a prose description (used in every agent prompt), an initial program,
the direction of each metric, and an evaluator that scores untrusted candidate source.
Evaluators must recompute every metric from the candidate's *outputs* with their own
copy of the inputs; the candidate runs in a child process (see
:mod:`contextevolve.evaluation.isolation`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Literal

from pydantic import BaseModel, Field

EvalStatus = Literal["ok", "invalid", "failed", "timeout"]
"""Outcome of one evaluation.

``ok``: ran and produced valid outputs. ``invalid``: ran but its outputs break the
task's contract (a model missing, memory exceeded, ...). ``failed``: could not run
(syntax error, exception in every case, malformed LLM output). ``timeout``: killed
at the wall-clock limit.
"""


class Evaluation(BaseModel):
    """The evaluator's verdict on one candidate program.

    ``metrics`` maps metric name to value (units per task, see ``Task.metrics``);
    ``combined_score`` is the scalar the search ranks by (oriented by
    ``Task.higher_is_better``); anything not ``ok`` scores the task's worst value.
    """

    status: EvalStatus
    metrics: dict[str, float] = Field(default_factory=dict)
    combined_score: float = 0.0
    reason: str = ""
    """Why the status is not ``ok``; empty when it is."""
    diagnostics: str = ""
    """Short text (a few lines) that later prompts may show the LLM."""
    seconds: float = 0.0
    """Wall-clock seconds the evaluation took, candidate process included."""


class MetricSpec(BaseModel):
    """One named metric of a task and the direction in which it improves."""

    name: str
    higher_is_better: bool = True
    description: str = ""


class Task(ABC):
    """A problem ContextEvolve can evolve a program for.

    Subclasses set the class attributes and implement :meth:`evaluate`.
    """

    name: str
    """Registry key, e.g. ``"model_placement"``."""
    title: str
    """Human-readable name."""
    description: str
    """Problem statement shown to every agent: the function contract and the objective."""
    metrics: list[MetricSpec]
    """The task's metrics; trajectories are categorised over these."""
    higher_is_better: bool = True
    """Orientation of ``combined_score`` for the search."""
    timeout_s: float = 60.0
    """Default wall-clock limit of one evaluation, seconds."""

    @property
    @abstractmethod
    def initial_program(self) -> str:
        """Source of the program evolution starts from."""

    @abstractmethod
    def evaluate(self, source: str, *, timeout_s: float | None = None) -> Evaluation:
        """Score candidate ``source``. Never raises for a bad candidate: returns a non-ok Evaluation."""

    def better(self, a: float | None, b: float | None) -> bool:
        """True when combined score ``a`` is strictly better than ``b`` (``None`` is worst)."""
        if a is None:
            return False
        if b is None:
            return True
        return a > b if self.higher_is_better else a < b

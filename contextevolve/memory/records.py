"""Records kept in the Evolve Buffer (token bookkeeping lives in :mod:`contextevolve.roles`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from contextevolve.roles import TokenUsage
from contextevolve.timing import LLMCall, Seconds

ProgramStatus = Literal["pending", "ok", "invalid", "failed", "timeout"]


def program_id(iteration: int) -> str:
    """Deterministic id of the program produced by ``iteration`` (0 = the initial program).

    Derived from the iteration so that replaying an iteration after a crash overwrites
    its record instead of adding a second one.
    """
    return f"it{iteration:05d}"


class RepairAttempt(BaseModel):
    """One failed version of a child and how the next version was made from it."""

    attempt: int
    """1 for the first repair, 2 for the second, ..."""
    method: Literal["model", "import", "restart"] = "model"
    """How the next version was made: the model fixed this one (``model``), the missing import was
    added without a model (``import``), or the model wrote the child again from its parent (``restart``)."""
    status: ProgramStatus
    """How the version being repaired ended (failed | invalid | timeout)."""
    reason: str
    """The evaluator's (or the editor's) reason for that failure."""
    source: str = ""
    """The failing version (empty when the Generator's reply never became a program)."""
    tokens: TokenUsage = Field(default_factory=dict)
    """Tokens the repair call cost (under ``repair``)."""


class ProgramRecord(BaseModel):
    """One program in the Evolve Buffer: c (source), z (abstract), s (scores) and lineage.

    Non-finite numbers survive a JSON round trip as the strings ``"NaN"`` / ``"Infinity"``.
    """

    model_config = ConfigDict(ser_json_inf_nan="strings")

    id: str
    iteration: int
    """Iteration that produced it; 0 for the initial program."""
    parent_id: str | None = None
    source: str = ""
    abstract: str = ""
    """Summarizer's abstract z: what is new and what was inherited."""
    metrics: dict[str, float] = Field(default_factory=dict)
    combined_score: float = 0.0
    status: ProgramStatus = "pending"
    reason: str = ""
    """Why the status is not ok (evaluation failure or malformed LLM output)."""
    diagnostics: str = ""
    traceback: str = ""
    """Where a failed program failed: frames of its own file and the exception (shown to repair)."""
    guidance: str = ""
    """Navigator guidance g the child was generated under."""
    exemplar_ids: list[str] = Field(default_factory=list)
    tokens: TokenUsage = Field(default_factory=dict)
    """Tokens spent producing this program, by role."""
    eval_seconds: float = 0.0
    """Seconds the sandbox took for this child's evaluations (pre-check smoke runs and full ones, every version)."""
    seconds: Seconds = Field(default_factory=dict)
    """Wall seconds spent producing this program, by phase (:mod:`contextevolve.timing`)."""
    llm_calls: list[LLMCall] = Field(default_factory=list)
    """The LLM requests made for this program, in order: role, phase, tokens, seconds."""
    attempts: list[RepairAttempt] = Field(default_factory=list)
    """Failed versions of this child, each handed to the Generator for repair, in order (empty when
    the first version was kept)."""
    prechecks_failed: int = 0
    """Versions stopped by a pre-check (compile, signature, smoke run) instead of a full evaluation."""
    committed: bool = False
    """True once ``update_buffer`` has admitted it; pending records are work in progress."""

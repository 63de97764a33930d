"""The graph state: identifiers, scores, guidance and short text — never whole programs.

Program source and the archive live in the memory layer (:mod:`contextevolve.memory`);
checkpoints therefore stay a few KB however long a run gets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from contextevolve.memory.records import TokenUsage, add_usage


def merge_usage(left: TokenUsage, right: TokenUsage | None) -> TokenUsage:
    """Reducer of ``iteration_usage``: sum role by role; ``None`` resets to empty."""
    return {} if right is None else add_usage(left, right)


@dataclass
class EvolveState:
    """State of one ContextEvolve run (one LangGraph thread)."""

    iteration: int = 0
    """Iterations completed: children admitted to the Evolve Buffer (the initial program is iteration 0)."""
    initial_id: str | None = None
    """Program id of the initial program c_0."""
    initial_score: float | None = None
    """Combined score of c_0, recomputed by the evaluator."""
    best_id: str | None = None
    """Id of the best ok program so far."""
    best_score: float | None = None
    """Its combined score."""

    parent_id: str | None = None
    """c_p of the current iteration (chosen by select_parent)."""
    parent_score: float | None = None
    """s_p, the parent's combined score."""
    trajectory_ids: list[str] = field(default_factory=list)
    """Child ids of the parent->child steps shown to the Navigator this iteration."""
    guidance: str = ""
    """g: the Navigator's directional guidance for this iteration (empty when ablated)."""
    candidate_ids: list[str] = field(default_factory=list)
    """Programs retrieved for the Sampler (relevance + diversity, failed ones included)."""
    exemplar_ids: list[str] = field(default_factory=list)
    """E_ctx: the k exemplars chosen for the Generator."""
    exemplar_code_ids: list[str] = field(default_factory=list)
    """Exemplars whose code fits in the context budget (the others are shown as abstracts)."""
    context_tokens: int = 0
    """Estimated tokens of the composed generator context Φ."""
    child_id: str | None = None
    """Id of this iteration's child (deterministic from the iteration number)."""
    child_status: str | None = None
    """pending | ok | invalid | failed | timeout."""
    child_score: float | None = None
    """The child's combined score once evaluated."""

    iteration_usage: Annotated[TokenUsage, merge_usage] = field(default_factory=dict)
    """Tokens spent in the current iteration, by role; reset when the child is admitted."""
    total_usage: TokenUsage = field(default_factory=dict)
    """Tokens spent by the whole run, by role."""
    stop_reason: str | None = None
    """Why the loop stops (iteration budget, target score, token budget); None while it goes on."""

"""Phase 4, Compose: choose what the Generator's prompt Φ = (z_p, g, E_ctx) shows within the token budget.

The choice is :func:`contextevolve.loop.composing.build_prompt`'s
(``RunContext.search.context_token_budget``); the state keeps only its ids, from which ``generate``
gets the same prompt back.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.loop.composing import build_prompt
from contextevolve.loop.policy import SearchPolicy
from contextevolve.loop.resources import memory_of, task_of


def compose(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
    """Choose the exemplars (and which exemplars' code) the Generator's prompt shows within the budget.

    Writes ``context_exemplar_ids``, ``exemplar_code_ids`` and ``context_tokens`` (the Sampler's
    ``exemplar_ids`` stay its own).
    """
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    parent = memory.buffer.require(state.parent_id)
    policy = SearchPolicy.of(ctx, state.iteration, state.worker)
    exemplars = [memory.buffer.require(pid) for pid in state.exemplar_ids]
    composed = build_prompt(policy, task, parent, state.guidance, exemplars,
                            ctx.search.context_token_budget)
    return {"context_exemplar_ids": list(composed.exemplar_ids),
            "exemplar_code_ids": list(composed.code_ids), "context_tokens": composed.tokens}

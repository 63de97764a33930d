"""Phase 8, Buffer update: B_e ← B_e ∪ {(c_p, s_p, z_p; c_c, s_c, z_c)}, then decide whether to go on."""

from __future__ import annotations

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import EvolveState
from contextevolve.memory.records import add_usage, total_tokens
from contextevolve.nodes.resources import memory_of, stop_reason, task_of


def update_buffer(state: EvolveState, runtime: Runtime[RunContext]) -> dict:
    """Commit the child (with this iteration's token usage), update the scoreboard and stop reason.

    Idempotent: replaying it after a crash rewrites the same record and yields the same counters.
    """
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    child = memory.buffer.require(state.child_id)
    child.tokens = dict(state.iteration_usage)
    child = memory.commit(child)
    iteration = child.iteration
    best_id, best_score = state.best_id, state.best_score
    if child.status == "ok" and task.better(child.combined_score, best_score):
        best_id, best_score = child.id, child.combined_score
    usage = add_usage(state.total_usage, state.iteration_usage)
    return {
        "iteration": iteration,
        "best_id": best_id,
        "best_score": best_score,
        "child_status": child.status,
        "child_score": child.combined_score,
        "total_usage": usage,
        "iteration_usage": None,
        "stop_reason": stop_reason(ctx, task, iteration, best_score, total_tokens(usage)),
    }

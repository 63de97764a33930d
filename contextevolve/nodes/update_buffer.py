"""Phase 8, Buffer update: B_e ← B_e ∪ {(c_p, s_p, z_p; c_c, s_c, z_c)} for every lane's child, then decide whether to go on."""

from __future__ import annotations

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import EvolveState
from contextevolve.nodes.identity import check_identity
from contextevolve.nodes.resources import memory_of, task_of
from contextevolve.nodes.stopping import round_size, stop_reason
from contextevolve.roles import add_usage, total_tokens
from contextevolve.timing import LLMCall, add_seconds, wall


def update_buffer(state: EvolveState, runtime: Runtime[RunContext]) -> dict:
    """Commit the round's children (each with its lane's tokens, seconds and LLM calls), update the
    scoreboard, the run's seconds (by phase, and elapsed) and stop reason.

    Children are committed in iteration order. Idempotent: replaying it after a crash
    rewrites the same records and yields the same counters. Every lane's last phase calls it; until
    ``state.round_size`` lanes of the round have reported it writes nothing (the round waits for
    its other lanes).
    """
    ctx = runtime.context
    check_identity(state.run_identity, ctx)
    if len(state.lane_results) < state.round_size:
        return {}
    task, memory = task_of(ctx), memory_of(ctx)
    best_id, best_score = state.best_id, state.best_score
    usage = dict(state.total_usage)
    seconds = dict(state.total_seconds)
    iteration = state.iteration
    child = None
    round_results = sorted(state.lane_results, key=lambda r: r["child_id"])
    for result in round_results:
        child = memory.buffer.require(result["child_id"])
        child.tokens = dict(result["usage"])
        child.seconds = dict(result.get("seconds") or {})
        child.llm_calls = [LLMCall.model_validate(c) for c in result.get("llm_calls") or []]
        child = memory.commit(child)
        iteration = max(iteration, child.iteration)
        if child.status == "ok" and task.better(child.combined_score, best_score):
            best_id, best_score = child.id, child.combined_score
        usage = add_usage(usage, result["usage"])
        seconds = add_seconds(seconds, child.seconds)
    # lanes run concurrently: the round took as long as its slowest lane (the commit itself, a few
    # milliseconds, is not timed, so that a replay of this node after a crash returns the same update)
    slowest = max((wall(r.get("seconds") or {}) for r in round_results), default=0.0)
    elapsed = round(state.elapsed_s + slowest, 3)
    return {
        "iteration": iteration,
        "best_id": best_id,
        "best_score": best_score,
        "child_id": child.id if child else state.child_id,
        "child_status": child.status if child else state.child_status,
        "child_score": child.combined_score if child else state.child_score,
        "total_usage": usage,
        "total_seconds": seconds,
        "elapsed_s": elapsed,
        "lane_results": Overwrite([]),
        "lanes": Overwrite([]),
        "round_size": round_size(ctx, iteration),
        "last_round": round_results or state.last_round,
        "stop_reason": stop_reason(ctx, task, iteration, best_score, total_tokens(usage), elapsed),
    }

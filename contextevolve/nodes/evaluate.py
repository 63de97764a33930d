"""Phase 6, Evaluate: s_c = E(c_c), in a separate, killable process (see contextevolve.evaluation)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import EvolveState
from contextevolve.nodes.resources import memory_of, task_of


def evaluate(state: EvolveState, runtime: Runtime[RunContext]) -> dict:
    """Score the pending child with the task's evaluator; a child that failed generation keeps score 0."""
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    child = memory.buffer.require(state.child_id)
    if child.status == "failed" and not child.source:
        return {"child_status": "failed", "child_score": child.combined_score}
    result = task.evaluate(child.source, timeout_s=ctx.eval_timeout_s)
    memory.buffer.update(child.id, status=result.status, metrics=result.metrics,
                         combined_score=result.combined_score, reason=result.reason,
                         diagnostics=result.diagnostics, eval_seconds=result.seconds)
    return {"child_status": result.status, "child_score": result.combined_score}

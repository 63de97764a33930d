"""Phase 6, Evaluate: s_c = E(c_c), in a sandboxed process tree (see contextevolve.evaluation).

The evaluation goes through the run's executor (``RunContext.executor``): a local pool
of ``eval_workers`` or a Ray cluster; parallel lanes therefore evaluate concurrently.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from contextevolve.evaluation.executors import executor_for
from contextevolve.graph.context import RunContext
from contextevolve.graph.state import LaneState
from contextevolve.nodes.resources import memory_of
from contextevolve.tasks.base import Evaluation


def run_evaluation(ctx: RunContext, source: str) -> Evaluation:
    """Evaluate ``source`` for ``ctx.task`` on the run's executor with the run's sandbox limits."""
    executor = executor_for(ctx.executor, ctx.eval_workers, ctx.ray_address)
    return executor.evaluate(ctx.task, source, limits=ctx.sandbox_limits())


def evaluate(state: LaneState, runtime: Runtime[RunContext]) -> dict:
    """Score the pending child with the task's evaluator; a child that failed generation keeps its worst score."""
    ctx = runtime.context
    memory = memory_of(ctx)
    child = memory.buffer.require(state.child_id)
    if child.status == "failed" and not child.source:
        return {"child_status": "failed", "child_score": child.combined_score}
    result = run_evaluation(ctx, child.source)
    memory.buffer.update(child.id, status=result.status, metrics=result.metrics,
                         combined_score=result.combined_score, reason=result.reason,
                         diagnostics=result.diagnostics, eval_seconds=result.seconds)
    return {"child_status": result.status, "child_score": result.combined_score}

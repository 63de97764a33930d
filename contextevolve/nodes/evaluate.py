"""Phase 6, Evaluate: s_c = E(c_c), in a sandboxed process tree (see contextevolve.evaluation).

The evaluation goes through the run's executor (``RunContext.executor``): a local pool
of ``eval_workers`` or a Ray cluster; parallel lanes therefore evaluate concurrently.
"""

from __future__ import annotations

import logging
import math

from langgraph.runtime import Runtime

from contextevolve.evaluation.executors import executor_for
from contextevolve.graph.context import RunContext
from contextevolve.graph.state import LaneState
from contextevolve.nodes.resources import memory_of, task_of
from contextevolve.tasks.base import Evaluation


_log = logging.getLogger(__name__)
_warned: set[str] = set()


def run_evaluation(ctx: RunContext, source: str) -> Evaluation:
    """Evaluate ``source`` for ``ctx.task`` on the run's executor with the run's sandbox limits.

    Total: an unexpected error anywhere in the evaluation (sandbox, executor, grader) or a
    score that is not a finite number makes the program ``failed`` with the reason, so one
    child can never stop the run (and a resumed run does not meet the same error again).
    Sandbox guarantees the host cannot enforce (``Evaluation.notes``) are logged once per process.
    """
    task = task_of(ctx)
    try:
        executor = executor_for(ctx.executor, ctx.eval_workers, ctx.ray_address)
        result = executor.evaluate(ctx.task, source, limits=ctx.sandbox_limits())
    except Exception as exc:  # noqa: BLE001 - see docstring
        _log.exception("evaluation failed unexpectedly")
        return task.rejected("failed", f"evaluation error: {type(exc).__name__}: {str(exc)[:300]}")
    values = [result.combined_score, *result.metrics.values()]
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
        return task.rejected("invalid", "the evaluation produced a score or metric that is not a finite number")
    for note in set(result.notes) - _warned:
        _warned.add(note)
        _log.warning("sandbox: %s", note)
    return result


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

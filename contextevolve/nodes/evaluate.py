"""Phase 6, Evaluate: s_c = E(c_c), in a sandboxed process tree (see contextevolve.evaluation).

The evaluation goes through the run's executor (``RunContext.parallelism.executor``): a local pool
of ``eval_workers`` or a Ray cluster; workers therefore evaluate concurrently. The
pre-checks (:mod:`contextevolve.tasks.prechecks`) run on this machine: they are short.
"""

from __future__ import annotations

import logging
import math
import time

from langgraph.runtime import Runtime

from contextevolve.evaluation.executors import executor_for
from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.loop.behaviour import behavioural_twin
from contextevolve.loop.policy import repair_due
from contextevolve.loop.resources import memory_of, task_of
from contextevolve.tasks.base import Evaluation
from contextevolve.tasks.prechecks import precheck
from contextevolve.timing import note

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
        where = ctx.parallelism
        executor = executor_for(where.executor, ctx.eval_slots, where.ray_address)
        result = executor.evaluate(ctx.task, source, limits=ctx.sandbox)
    except Exception as exc:  # noqa: BLE001 - see docstring
        _log.exception("evaluation failed unexpectedly")
        return task.rejected("failed", f"evaluation error: {type(exc).__name__}: {str(exc)[:300]}",
                             failure_kind="evaluator")
    values = [result.combined_score, *result.metrics.values()]
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
        return task.rejected("invalid",
                             "the evaluation produced a score or metric that is not a finite number")
    for sandbox_note in set(result.notes) - _warned:
        _warned.add(sandbox_note)
        _log.warning("sandbox: %s", sandbox_note)
    return result


def evaluate(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
    """Score the pending child: pre-checks first (``ctx.search.prechecks``), then the full evaluation.

    A child that failed generation keeps its worst score; a pre-check failure costs no full evaluation.
    Either failure, and a full evaluation that ends ``failed`` or ``invalid``, sets ``repair_due`` while a
    repair is left and the failure kind is repairable (:func:`~contextevolve.loop.policy.repair_due`; a
    timeout is not). A valid child whose results equal its parent's or a stored program's is marked a
    behavioural twin (``search.behavioural_twins``, :mod:`contextevolve.loop.behaviour`), which sets
    ``repair_due`` for its one ask after no effect. Only a ``pending`` child is evaluated, so a replay after
    a crash neither evaluates it again nor counts its seconds and pre-checks twice.
    """
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    child = memory.buffer.require(state.child_id)
    if child.status != "pending":  # generation failed, or a replay after a crash: the outcome is recorded
        return {"fix_pending": False, "repair_due": repair_due(ctx, state, child)}
    started = time.perf_counter()
    result = precheck(task, child.source, ctx.sandbox) if ctx.search.prechecks else None
    note("evaluate.precheck", time.perf_counter() - started)
    changes = {}
    if result is not None:
        changes["prechecks_failed"] = child.prechecks_failed + 1
    else:
        started = time.perf_counter()
        result = run_evaluation(ctx, child.source)
        note("evaluate.full", time.perf_counter() - started)
        note("evaluate.import", result.import_seconds)
        note("evaluate.calls", result.call_seconds)
    if result.status == "ok":
        task.observe(result.metrics)  # graded on a Ray worker, the driver's task learns its metrics here
    changes.update(status=result.status, metrics=result.metrics, combined_score=result.combined_score,
                   reason=result.reason, failure_kind=result.failure_kind, diagnostics=result.diagnostics,
                   traceback=result.traceback, outputs_digest=result.outputs_digest,
                   eval_seconds=child.eval_seconds + result.seconds)
    scored = child.model_copy(update=changes)
    if scored.status == "ok" and ctx.search.behavioural_twins:  # one write: a replay finds it marked
        parent = memory.buffer.require(scored.parent_id)
        changes["behavioural_twin_of"] = behavioural_twin(task, scored, parent, memory.buffer.committed())
    updated = memory.buffer.update(child.id, **changes)
    return {"fix_pending": False, "repair_due": repair_due(ctx, state, updated)}

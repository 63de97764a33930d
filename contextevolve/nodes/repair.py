"""Repair (between phases 6 and 7; not in the paper): a child's next version, evaluated again.

A child that failed on a missing import of a known name gets the import added without a model call, up to
:data:`~contextevolve.loop.policy.IMPORT_FIXES` per child (:mod:`contextevolve.program.fixes`;
``import_fixes``); a valid behavioural twin is asked once more, told its change had no effect. No failure
goes back to the model: model repairs were tried and not adopted (docs/decisions/repair-restart.md).
``import_fixes`` off with ``behavioural_twins`` off is the paper's Algorithm 1. The mechanism: docs/search.md.
"""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.loop import requests
from contextevolve.loop.behaviour import no_effect_reason
from contextevolve.loop.generation import Outcome, twin_of
from contextevolve.loop.policy import SearchPolicy, repair_due
from contextevolve.loop.resources import memory_of, task_of
from contextevolve.memory.records import ProgramRecord, RepairAttempt
from contextevolve.program.fixes import add_import
from contextevolve.program.twins import twin_reason


def after_evaluate(state: WorkerState) -> Literal["repair", "summarize"]:
    """Route a child with a next version to make to :func:`repair`, any other to summarize."""
    return "repair" if state.repair_due else "summarize"


def after_repair(state: WorkerState) -> Literal["evaluate", "repair", "summarize"]:
    """Route a fix to evaluate, and a repair that produced none to the next repair or to summarize.

    The next repair while attempts are left, else summarize.
    """
    if state.fix_pending:
        return "evaluate"
    return "repair" if state.repair_due else "summarize"


def repair_phase(state: WorkerState, runtime: Runtime[RunContext]) -> str:
    """The phase a :func:`repair` step is timed as: ``no_effect_ask`` or ``repair``.

    ``no_effect_ask`` when the child is valid (a behavioural twin asked once more, a Generator request
    booked under ``generator``), so that the seconds table and the LLM calls by role do not show as a
    repair what the run's repair settings never made; ``repair`` for a failed child.
    """
    child = memory_of(runtime.context).buffer.require(state.child_id)
    return "no_effect_ask" if child.status == "ok" else "repair"


def repair(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
    """Make the child's next version (:meth:`SearchPolicy.strategy_for`) and store it.

    A failed child gets its missing import added, without a model; the version is stored as pending (a
    twin when it is the parent or a buffered program), and the failed version goes to the child's
    ``attempts``. A valid behavioural twin is asked once more (:func:`_ask_after_no_effect`).
    """
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    child = memory.buffer.require(state.child_id)
    parent = memory.buffer.require(child.parent_id)
    number = state.repair_step + 1
    done = [a for a in child.attempts if a.attempt == number]
    if done:  # replayed after a crash: this repair was already stored
        return {"repair_step": number, "fix_pending": child.status == "pending",
                "repair_due": repair_due(ctx, state, child, done[0].tokens),
                "iteration_usage": done[0].tokens}
    policy = SearchPolicy.of(ctx, state.iteration, state.worker)
    strategy, line = policy.strategy_for(child)
    if strategy == "no_effect":
        if not policy.behavioural_twins:  # resumed with them switched off: nothing to ask
            return {"repair_step": state.repair_step, "fix_pending": False, "repair_due": False}
        return _ask_after_no_effect(ctx, state, child, policy, number)
    source = add_import(child.source, line)  # no model needed (contextevolve.program.fixes)
    twin = twin_of(memory, task, Outcome(source=source), parent)
    attempt = RepairAttempt(attempt=number, method=strategy, status=child.status, reason=child.reason,
                            failure_kind=child.failure_kind, source=child.source)
    changes: dict = {"attempts": [*child.attempts, attempt]}
    if twin is not None:  # the twin's code is not kept, as in generate (the attempts keep the last one)
        changes.update(status="failed", reason=twin_reason(twin), failure_kind="twin", source="")
    else:
        changes.update(status="pending", reason="", failure_kind="", source=source, diagnostics="",
                       traceback="")
    updated = memory.buffer.update(child.id, **changes)
    return {"repair_step": number, "fix_pending": updated.status == "pending",
            "repair_due": repair_due(ctx, state, updated), "iteration_usage": {}}


def _ask_after_no_effect(ctx: RunContext, state: WorkerState, child: ProgramRecord, policy: SearchPolicy,
                         number: int) -> dict:
    """Ask the Generator once more for a valid child that changed no result (a behavioural twin).

    The ask (:func:`~contextevolve.loop.requests.no_effect`, booked under ``generator``) edits
    the version that had no effect; a new program replaces it and is evaluated. When none comes (an
    unusable reply, the same version, a code twin) the behavioural twin stays the child, valid.
    """
    task, memory = task_of(ctx), memory_of(ctx)
    twin = memory.buffer.require(child.behavioural_twin_of)
    request = requests.no_effect(task, child, twin, policy)
    outcome, = requests.send(ctx, request)
    # (the parent is committed, so comparing with the version and the committed programs covers it)
    new = (not outcome.failure and not outcome.unchanged and bool(outcome.source)
           and twin_of(memory, task, outcome, child) is None)
    attempt = RepairAttempt(attempt=number, method="no_effect", status="ok", reason=no_effect_reason(twin),
                            source=child.source, tokens=outcome.usage)
    changes: dict = {"attempts": [*child.attempts, attempt], "mutation": request.mutation}
    if new:
        changes.update(source=outcome.source, status="pending", reason="", failure_kind="",
                       behavioural_twin_of="", outputs_digest="", diagnostics="", traceback="")
    updated = memory.buffer.update(child.id, **changes)
    return {"repair_step": number, "fix_pending": bool(new),
            "repair_due": repair_due(ctx, state, updated, outcome.usage), "iteration_usage": outcome.usage}

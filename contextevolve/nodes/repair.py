"""Repair (between phases 6 and 7; not in the paper): a failed child goes back to the Generator.

A failed child is shown to the Generator's model (tokens booked under ``repair``) with the evaluator's reason
and the traceback frames of its own file; the fix replaces its source and is evaluated again. At most
``repair_attempts`` model repairs per child, plus up to :data:`~contextevolve.loop.policy.IMPORT_FIXES` free
import fixes (:mod:`contextevolve.program.fixes`); with ``repair_restart`` the last model repair writes the
child again from its parent. ``repair_attempts = 0`` with ``import_fixes`` off is the paper's Algorithm 1.
Why: docs/decisions/repair-restart.md; the mechanism: docs/search.md.
"""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.loop.behaviour import measured_effect, no_effect_reason
from contextevolve.loop.composing import parent_text
from contextevolve.loop.generation import REPLY_EXCERPT, Outcome, ask_generator, second_ask, twin_of
from contextevolve.loop.policy import SearchPolicy, model_repairs, repair_due
from contextevolve.loop.resources import memory_of, task_of
from contextevolve.loop.stopping import worker_budget_spent
from contextevolve.memory.records import FailureKind, ProgramRecord, RepairAttempt
from contextevolve.program.fixes import add_import
from contextevolve.program.twins import twin_reason
from contextevolve.prompts import repair as prompt
from contextevolve.prompts.generator import no_effect_messages
from contextevolve.roles import add_usage


def after_evaluate(state: WorkerState) -> Literal["repair", "summarize"]:
    """Route a child that failed with repair attempts left to :func:`repair`, any other to summarize."""
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
    """Make the failed child's next version (:meth:`SearchPolicy.strategy_for`) and store it.

    It is stored as pending, or failed with a reason and kind when none came; the failed version goes to
    the child's ``attempts``. A reply that gives the failing program back unchanged counts as an attempt
    and the next one sees the same error; a fix that is the parent or a buffered program (a twin) ends the
    repairs. The requests' seeds and temperatures are :meth:`SearchPolicy.repair`'s, numbered by model
    repairs (an added import asks nothing, so it neither heats nor reseeds the next request).
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
    asked = model_repairs(child) + 1  # samples by model repairs: an added import made no request
    twin: str | None = None
    where = f"repair {number}"
    if strategy == "no_effect":
        if not policy.behavioural_twins:  # resumed with them switched off: nothing to ask
            return {"repair_step": state.repair_step, "fix_pending": False, "repair_due": False}
        return _ask_after_no_effect(ctx, state, child, policy, number)
    if strategy == "import":  # no model needed (contextevolve.program.fixes)
        outcome = Outcome(source=add_import(child.source, line))
        twin = twin_of(memory, task, outcome, parent)
    elif strategy == "restart":
        messages = prompt.restart_messages(task.description, parent.source, child.reason, child.traceback,
                                           policy.form, idea=child.guidance,
                                           parent_text=parent_text(policy, parent))
        outcome = ask_generator(ctx, messages, policy.repair(asked, restart=True), policy,
                                base=parent.source, book="repair")
        twin = twin_of(memory, task, outcome, parent)
        # it wrote its parent again
        if twin is not None and not worker_budget_spent(ctx, state, outcome.usage):
            again = second_ask(ctx, task, parent, policy, policy.restart_second_ask(asked),
                               after_restart=True, book="repair")
            twin = twin_of(memory, task, again, parent)
            outcome = Outcome(source=again.source, text=again.text,
                              usage=add_usage(outcome.usage, again.usage),
                              failure=again.failure, problem=again.problem, unchanged=again.unchanged,
                              mutation=again.mutation)
            where = "a restart's second ask"
    else:
        base = child.source or parent.source  # no source: the Generator's edit never applied
        messages = prompt.messages(task.description, base, child.reason, child.traceback, policy.form,
                                   unusable_reply="" if child.source else child.diagnostics,
                                   idea=child.guidance)
        outcome = ask_generator(ctx, messages, policy.repair(asked, restart=False), policy, base=base,
                                book="repair")
        if outcome.unchanged and not child.source:  # the parent again, from a child that never had code
            outcome = Outcome(text=outcome.text, usage=outcome.usage, failure="edit",
                              problem="the child is identical to its parent")
        elif not outcome.unchanged:
            twin = twin_of(memory, task, outcome, parent)
    attempt = RepairAttempt(attempt=number, method=strategy, status=child.status, reason=child.reason,
                            failure_kind=child.failure_kind, source=child.source, tokens=outcome.usage)
    changes: dict = {"attempts": [*child.attempts, attempt]}
    if outcome.mutation:
        changes["mutation"] = outcome.mutation
    kind: FailureKind = ""
    # the failing program came back: keep its error for the next attempt
    if outcome.unchanged and strategy == "model":
        status, reason, kind = child.status, child.reason, child.failure_kind
    elif twin is not None:  # the twin's code is not kept, as in generate (the attempts keep the last one)
        status, reason, kind = "failed", twin_reason(twin), "twin"
        changes.update(source="")
    elif outcome.failure:
        status, kind = "failed", outcome.failure
        reason = (f"endpoint fault during {where}: {outcome.problem}" if kind == "endpoint"
                  else f"{where} could not be applied: {outcome.problem}")
        changes.update(diagnostics=outcome.text[:REPLY_EXCERPT], traceback="",
                       source=outcome.source or child.source)
    else:
        status, reason = "pending", ""
        changes.update(source=outcome.source, diagnostics="", traceback="")
    changes.update(status=status, reason=reason, failure_kind=kind)
    due = repair_due(ctx, state, memory.buffer.update(child.id, **changes), outcome.usage)
    return {"repair_step": number, "fix_pending": status == "pending", "repair_due": due,
            "iteration_usage": outcome.usage}


def _ask_after_no_effect(ctx: RunContext, state: WorkerState, child: ProgramRecord, policy: SearchPolicy,
                         number: int) -> dict:
    """Ask the Generator once more for a valid child that changed no result (a behavioural twin).

    The ask (:func:`~contextevolve.prompts.generator.no_effect_messages`, booked under ``generator``) edits
    the version that had no effect; a new program replaces it and is evaluated. When none comes (an
    unusable reply, the same version, a code twin) the behavioural twin stays the child, valid.
    """
    task, memory = task_of(ctx), memory_of(ctx)
    twin = memory.buffer.require(child.behavioural_twin_of)
    form = policy.second_form
    mutation = policy.no_effect_mutation()
    messages = no_effect_messages(task.description, child.source, measured_effect(twin), mutation,
                                  task.higher_is_better, form, change_line=policy.second_change_line)
    outcome = ask_generator(ctx, messages, policy.no_effect_ask(), policy, base=child.source, form=form,
                            from_hidden_view=True)
    # (the parent is committed, so comparing with the version and the committed programs covers it)
    new = (not outcome.failure and not outcome.unchanged and bool(outcome.source)
           and twin_of(memory, task, outcome, child) is None)
    attempt = RepairAttempt(attempt=number, method="no_effect", status="ok", reason=no_effect_reason(twin),
                            source=child.source, tokens=outcome.usage)
    changes: dict = {"attempts": [*child.attempts, attempt], "mutation": mutation}
    if new:
        changes.update(source=outcome.source, status="pending", reason="", failure_kind="",
                       behavioural_twin_of="", outputs_digest="", diagnostics="", traceback="")
    updated = memory.buffer.update(child.id, **changes)
    return {"repair_step": number, "fix_pending": bool(new),
            "repair_due": repair_due(ctx, state, updated, outcome.usage), "iteration_usage": outcome.usage}

"""Repair (between phases 6 and 7; not in the paper): a failed child goes back to the Generator with its error.

Not in the paper's Algorithm 1 (``RunContext.search.repair_attempts = 0`` restores it). A child that
failed — it does not compile, raises, fails a pre-check, returns invalid output, or the
Generator's edit could not be applied — is shown to the Generator's model with the evaluator's
reason and the traceback frames of its own file (line numbers in the child), and the model
returns a minimal fix (SEARCH/REPLACE edits or a whole program). The fixed version replaces the
child's source and is evaluated again (a NameError for a known importable name, such as ``heapq`` or
``List``, is fixed by adding the import, without a model call: :mod:`contextevolve.fixes`); the
failed version is kept in the child's ``attempts`` with the reason it failed and the repair's tokens,
which are booked under the ``repair`` role.
At most ``repair_attempts`` repairs by the model per child; adding a missing import needs no model and does
not count against them (at most :data:`IMPORT_FIXES` per child), so a repair's rewrite that forgot an import
is still fixed, and a child whose import was added still gets its model repair. A fix that is the parent or
a buffered program again (normalised code) ends the repairs: the child is a failed twin. A reply that gives
the failing program back unchanged counts as an attempt; the next one sees the same error.
With ``repair_restart`` (default) the last model repair (the only one with the default R = 1) does not fix
the failing program but writes the child again from its parent, told the error the failed version met
(:func:`contextevolve.prompts.repair.restart_messages`: fixes of the model's own rewrites almost
never worked with the embedded model). A restart that writes its parent out again (a twin) gets the
Generator's second ask within the same repair: a new conversation naming one concrete mutation,
hotter (:func:`restart_again`); restarts ended as copies of their parent in most failed children of
the runs before it. A repair only chooses its strategy (:func:`strategy_for`); the request and its
sampling are :mod:`contextevolve.nodes.ask`'s.
"""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime

from contextevolve.fixes import add_import, missing_import
from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.memory.records import FailureKind, ProgramRecord, RepairAttempt, repairable
from contextevolve.memory.store import RunMemory
from contextevolve.nodes.ask import (REPLY_EXCERPT, Outcome, SamplingPolicy, ask_generator, reask_mode, twin_of,
                                     twin_reason)
from contextevolve.nodes.compose import parent_text
from contextevolve.nodes.resources import memory_of, task_of
from contextevolve.nodes.stopping import worker_budget_spent
from contextevolve.prompts import repair as prompt
from contextevolve.prompts.generator import reask_messages
from contextevolve.roles import add_usage
from contextevolve.tasks.base import Task

Strategy = Literal["import", "model", "restart"]
"""How a repair makes the child's next version (stored as :attr:`RepairAttempt.method`)."""

IMPORT_FIXES = 3
"""Most imports added to one child without a model (each adds a line the source lacks, so the bound
only keeps a program that keeps failing on new names from looping)."""


def model_repairs(child: ProgramRecord) -> int:
    """Repairs of ``child`` so far that asked the model (every attempt but an added import)."""
    return sum(a.method != "import" for a in child.attempts)


def import_fix(child: ProgramRecord) -> str:
    """The import line that would fix ``child``'s failure (a NameError of a known importable name its
    source lacks, within :data:`IMPORT_FIXES`), else ``""``."""
    if not child.source or len(child.attempts) - model_repairs(child) >= IMPORT_FIXES:
        return ""
    line = missing_import(f"{child.reason}\n{child.traceback}")
    return line if line and line not in child.source.splitlines() else ""


def repair_due(ctx: RunContext, child: ProgramRecord, budget_spent: bool = False) -> bool:
    """True when the stored ``child`` failed with a repairable kind and a repair is left: a model repair
    (fewer than ``repair_attempts`` so far, and the worker's share of the token budget not spent: ``budget_spent``,
    :func:`~contextevolve.nodes.stopping.worker_budget_spent`) or an import fix (:func:`import_fix`, free).
    With ``repair_attempts = 0`` nothing is repaired, imports included (the paper's loop)."""
    if child.status in ("pending", "ok") or not repairable(child.failure_kind) or ctx.search.repair_attempts <= 0:
        return False
    return (model_repairs(child) < ctx.search.repair_attempts and not budget_spent) or bool(import_fix(child))


def after_evaluate(state: WorkerState) -> Literal["repair", "summarize"]:
    """Route a child that failed with repair attempts left to :func:`repair`, any other to summarize."""
    return "repair" if state.repair_due else "summarize"


def after_repair(state: WorkerState) -> Literal["evaluate", "repair", "summarize"]:
    """A fix goes to evaluate; a repair that produced none goes to the next repair while attempts are
    left, else to summarize."""
    if state.fix_pending:
        return "evaluate"
    return "repair" if state.repair_due else "summarize"


def strategy_for(ctx: RunContext, child: ProgramRecord) -> tuple[Strategy, str]:
    """``(strategy, import line)`` of ``child``'s next repair: ``import`` when :func:`import_fix` has a line
    to add; else ``restart`` for the last model repair with ``repair_restart`` on and a source to restart
    from; else ``model``."""
    line = import_fix(child)
    if line:
        return "import", line
    last = model_repairs(child) + 1 >= ctx.search.repair_attempts
    return ("restart" if ctx.search.repair_restart and last and child.source else "model"), ""


def restart_again(ctx: RunContext, task: Task, memory: RunMemory, parent: ProgramRecord,
                  policy: SamplingPolicy, number: int) -> tuple[Outcome, str | None]:
    """The second ask after restart ``number`` wrote its parent again, as the Generator's after a twin:
    a new conversation naming another mutation than the Generator's own, sampled by
    :meth:`~contextevolve.nodes.ask.SamplingPolicy.restart_second_ask`. Returns the outcome (booked as
    ``repair``) and its twin id (None when new)."""
    mode = reask_mode(ctx.search.generation_mode)
    messages = reask_messages(task.description, parent.source, policy.mutation(after_restart=True),
                              task.higher_is_better, mode)
    outcome = ask_generator(ctx, messages, policy.restart_second_ask(number), base=parent.source, mode=mode,
                            book="repair", docstrings_hidden=True)
    return outcome, twin_of(memory, task, outcome, parent)


def repair(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
    """Make the failed child's next version (:func:`strategy_for`) and store it as pending, or failed
    with a reason and kind when none came.

    The requests' seeds and temperatures are :meth:`~contextevolve.nodes.ask.SamplingPolicy.repair`'s, numbered
    by model repairs (an added import asks nothing, so it neither heats nor reseeds the next request).
    """
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    child = memory.buffer.require(state.child_id)
    parent = memory.buffer.require(child.parent_id)
    number = state.repair_step + 1
    done = [a for a in child.attempts if a.attempt == number]
    if done:  # replayed after a crash: this repair was already stored
        spent = worker_budget_spent(ctx, state, done[0].tokens)
        return {"repair_step": number, "fix_pending": child.status == "pending",
                "repair_due": repair_due(ctx, child, spent), "iteration_usage": done[0].tokens}
    strategy, line = strategy_for(ctx, child)
    policy, mode = SamplingPolicy.of(ctx, state.iteration, state.worker), ctx.search.generation_mode
    asked = model_repairs(child) + 1  # samples by model repairs: an added import made no request
    twin: str | None = None
    where = f"repair {number}"
    if strategy == "import":  # no model needed (contextevolve.fixes)
        outcome = Outcome(source=add_import(child.source, line))
        twin = twin_of(memory, task, outcome, parent)
    elif strategy == "restart":
        messages = prompt.restart_messages(task.description, parent.source, child.reason, child.traceback, mode,
                                           idea=child.guidance, parent_text=parent_text(ctx, parent))
        outcome = ask_generator(ctx, messages, policy.repair(asked, restart=True), base=parent.source, mode=mode,
                                book="repair")
        twin = twin_of(memory, task, outcome, parent)
        if twin is not None and not worker_budget_spent(ctx, state, outcome.usage):  # it wrote its parent again
            again, twin = restart_again(ctx, task, memory, parent, policy, asked)
            outcome = Outcome(source=again.source, text=again.text, usage=add_usage(outcome.usage, again.usage),
                              failure=again.failure, problem=again.problem, unchanged=again.unchanged)
            where = "a restart's second ask"
    else:
        base = child.source or parent.source  # no source: the Generator's edit never applied
        messages = prompt.messages(task.description, base, child.reason, child.traceback, mode,
                                   unusable_reply="" if child.source else child.diagnostics, idea=child.guidance)
        outcome = ask_generator(ctx, messages, policy.repair(asked, restart=False), base=base, mode=mode,
                                book="repair")
        if outcome.unchanged and not child.source:  # the parent again, from a child that never had code
            outcome = Outcome(text=outcome.text, usage=outcome.usage, failure="edit",
                              problem="the child is identical to its parent")
        elif not outcome.unchanged:
            twin = twin_of(memory, task, outcome, parent)
    attempt = RepairAttempt(attempt=number, method=strategy, status=child.status, reason=child.reason,
                            failure_kind=child.failure_kind, source=child.source, tokens=outcome.usage)
    changes: dict = {"attempts": [*child.attempts, attempt]}
    kind: FailureKind = ""
    if outcome.unchanged and strategy == "model":  # the failing program came back: keep its error for the next attempt
        status, reason, kind = child.status, child.reason, child.failure_kind
    elif twin is not None:  # the twin's code is not kept, as in generate (the attempts keep the last one)
        status, reason, kind = "failed", twin_reason(twin), "twin"
        changes.update(source="")
    elif outcome.failure:
        status, kind = "failed", outcome.failure
        reason = (f"endpoint fault during {where}: {outcome.problem}" if kind == "endpoint"
                  else f"{where} could not be applied: {outcome.problem}")
        changes.update(diagnostics=outcome.text[:REPLY_EXCERPT], traceback="", source=outcome.source or child.source)
    else:
        status, reason = "pending", ""
        changes.update(source=outcome.source, diagnostics="", traceback="")
    changes.update(status=status, reason=reason, failure_kind=kind)
    due = repair_due(ctx, memory.buffer.update(child.id, **changes), worker_budget_spent(ctx, state, outcome.usage))
    return {"repair_step": number, "fix_pending": status == "pending", "repair_due": due,
            "iteration_usage": outcome.usage}

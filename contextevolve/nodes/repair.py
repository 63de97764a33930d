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
At most ``repair_attempts`` repairs per child. A fix that is the parent or a buffered program
again (normalised code) ends the repairs: the child is a failed duplicate. A reply that gives
the failing program back unchanged counts as an attempt; the next one sees the same error.
With ``repair_restart`` (default) the last repair (the only one with the default R = 1) does not fix
the failing program but writes the child again from its parent, told the error the failed version met
(:func:`contextevolve.prompts.repair.restart_messages`: fixes of the model's own rewrites almost
never worked with the embedded model). A restart that writes its parent out again (a twin) gets the
Generator's second ask within the same repair: a new conversation naming one concrete mutation,
hotter (:func:`second_ask`); restarts ended as copies of their parent in most failed children of
the runs before it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from langgraph.runtime import Runtime

from contextevolve.editing import EditError, build_child
from contextevolve.fixes import add_import, missing_import
from contextevolve.graph.context import RunContext
from contextevolve.graph.state import LaneState
from contextevolve.llm.calls import MalformedReply, call_role
from contextevolve.memory.records import RepairAttempt
from contextevolve.memory.records import ProgramRecord
from contextevolve.memory.store import RunMemory
from contextevolve.nodes.compose import parent_text
from contextevolve.nodes.generate import (REASK_HOTTER, REPLY_EXCERPT, find_twin, reask_mode, repairable,
                                          twin_reason, whole_program)
from contextevolve.nodes.resources import memory_of, task_of
from contextevolve.prompts import repair as prompt
from contextevolve.prompts.generator import mutation_for, reask_messages, stop_after_code
from contextevolve.roles import TokenUsage, add_usage, booked_as
from contextevolve.tasks.base import Task

REPAIR_HOTTER = 0.2
"""Temperature added per repair after the first."""
REPAIR_SEED_STRIDE = 1000
"""Seed offset per repair, so no two repair requests of a run share a seed."""
SECOND_ASK_SEED = 500
"""Seed offset of a restart's second ask from the restart's own seed."""


def second_ask(ctx: RunContext, task: Task, memory: RunMemory, parent: ProgramRecord, iteration: int,
               seed: int) -> tuple[str, str, str, str | None, TokenUsage]:
    """Ask once more after a restart wrote its parent again, as the Generator does after a twin.

    A new conversation (:func:`~contextevolve.prompts.generator.reask_messages`) with another
    mutation than the Generator's own second ask (``mutation_for(ctx.seed + 1, iteration)``), the
    Generator's temperature + ``REASK_HOTTER``, seed ``seed + SECOND_ASK_SEED``.

    Returns:
        ``(source, reply text, problem, twin id or None, usage booked as repair)``; ``problem`` is
        empty when the reply became a program.
    """
    mode = reask_mode(ctx.search.generation_mode)
    messages = reask_messages(task.description, parent.source, mutation_for(ctx.seed + 1, iteration),
                              task.higher_is_better, mode)
    hotter = ctx.llm.temperature_for("generator") + REASK_HOTTER
    again = replace(ctx, seed=seed + SECOND_ASK_SEED, temperatures={**ctx.llm.temperatures, "generator": hotter})
    try:
        reply = call_role("generator", messages, again, check=whole_program(parent.source, mode),
                          stop=stop_after_code(mode, ctx))
    except MalformedReply as exc:
        return "", exc.text, f"endpoint fault during a restart's second ask: {exc}", None, booked_as(exc.usage, "repair")
    usage = booked_as(reply.usage, "repair")
    try:
        source = build_child(parent.source, reply.text, mode, truncated=reply.truncated)
    except EditError as exc:
        if exc.duplicate:
            return parent.source, reply.text, "", parent.id, usage
        return exc.source, reply.text, f"a restart's second ask could not be applied: {exc}", None, usage
    return source, reply.text, "", find_twin(memory, source, parent, task.job().entry or None), usage


def after_evaluate(state: LaneState) -> Literal["repair", "summarize"]:
    """Route a child that failed with repair attempts left to :func:`repair`, any other to summarize."""
    return "repair" if state.repair_due else "summarize"


def after_repair(state: LaneState) -> Literal["evaluate", "repair", "summarize"]:
    """A fix goes to evaluate; a repair that produced none goes to the next repair while attempts are
    left, else to summarize."""
    if state.child_status == "pending":
        return "evaluate"
    return "repair" if state.repair_due else "summarize"


def repair(state: LaneState, runtime: Runtime[RunContext]) -> dict:
    """Ask for a minimal fix of the failed child and store it as the child's new, pending version.

    Repair n (1-based) samples with seed ``seed + REPAIR_SEED_STRIDE * n + iteration`` and the
    Generator's temperature plus ``REPAIR_HOTTER * (n - 1)``: a model that returned the failing
    program unchanged is asked again, on the same error, with other randomness. A restart (the last
    repair, see the module docstring) is a new generation and samples at the Generator's temperature.
    """
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    child = memory.buffer.require(state.child_id)
    parent = memory.buffer.require(child.parent_id)
    number = state.repairs + 1
    done = [a for a in child.attempts if a.attempt == number]
    if done:  # replayed after a crash: this repair was already stored
        due = child.status != "pending" and repairable(child.reason) and number < ctx.search.repair_attempts
        return {"repairs": number, "child_status": child.status, "repair_due": due,
                "iteration_usage": done[0].tokens}
    line = missing_import(f"{child.reason}\n{child.traceback}") if child.source else None
    restart = (ctx.search.repair_restart and number == ctx.search.repair_attempts and bool(child.source)
               and not (line and line not in child.source.splitlines()))
    base = child.source if child.source and not restart else parent.source  # no source: the edit never applied
    if restart:
        messages = prompt.restart_messages(task.description, base, child.reason, child.traceback,
                                           ctx.search.generation_mode, idea=child.guidance,
                                           parent_text=parent_text(ctx, parent))
    else:
        messages = prompt.messages(task.description, base, child.reason, child.traceback, ctx.search.generation_mode,
                                   unusable_reply="" if child.source else child.diagnostics, idea=child.guidance)
    hotter = ctx.llm.temperature_for("generator") + (0.0 if restart else REPAIR_HOTTER * (number - 1))
    call_ctx = replace(ctx, seed=ctx.seed + REPAIR_SEED_STRIDE * number + state.iteration,
                       temperatures={**ctx.llm.temperatures, "generator": hotter})
    usage: TokenUsage = {}
    fixed, problem, text, unchanged = "", "", "", False
    try:
        if line and not restart and line not in base.splitlines():  # no model needed (contextevolve.fixes)
            fixed = add_import(base, line)
        else:
            reply = call_role("generator", messages, call_ctx, check=whole_program(base, ctx.search.generation_mode),
                              stop=stop_after_code(ctx.search.generation_mode, ctx))
            usage, text = booked_as(reply.usage, "repair"), reply.text
            fixed = build_child(base, reply.text, ctx.search.generation_mode, truncated=reply.truncated)
    except MalformedReply as exc:
        usage, text, problem = booked_as(exc.usage, "repair"), exc.text, f"endpoint fault during repair {number}: {exc}"
    except EditError as exc:
        fixed = base if restart and exc.duplicate else exc.source  # (a restart's copy: its parent's twin)
        unchanged = exc.duplicate and bool(child.source) and not restart
        problem = "" if unchanged or (restart and exc.duplicate) else f"repair {number} could not be applied: {exc}"
    twin = find_twin(memory, fixed, parent, task.job().entry or None) if fixed and not unchanged else None
    if restart and twin is not None and not problem:  # the restart wrote its parent again
        fixed, text, problem, twin, more = second_ask(ctx, task, memory, parent, state.iteration, call_ctx.seed)
        usage = add_usage(usage, more)
    method = "restart" if restart else "import" if line and line not in base.splitlines() else "model"
    attempt = RepairAttempt(attempt=number, method=method, status=child.status, reason=child.reason,
                            source=child.source, tokens=usage)
    changes: dict = {"attempts": [*child.attempts, attempt]}
    if unchanged:  # the failing program came back: keep its error for the next attempt
        status, reason = child.status, child.reason
    elif twin is not None:  # the twin's code is not kept, as in generate (the attempts keep the last one)
        status, reason = "failed", twin_reason(twin)
        changes.update(source="")
    elif problem:
        status, reason = "failed", problem
        changes.update(diagnostics=text[:REPLY_EXCERPT], traceback="", source=fixed or child.source)
    else:
        status, reason = "pending", ""
        changes.update(source=fixed, diagnostics="", traceback="")
    changes.update(status=status, reason=reason)
    memory.buffer.update(child.id, **changes)
    due = status != "pending" and repairable(reason) and number < ctx.search.repair_attempts
    return {"repairs": number, "child_status": status, "repair_due": due, "iteration_usage": usage}

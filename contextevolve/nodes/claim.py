"""Claim: the worker's next iteration, taken from the Evolve Buffer before any LLM call — or the end.

The child's id is claimed atomically (:meth:`~contextevolve.memory.buffer.EvolveBuffer.claim`) and kept
in the worker's checkpoint, so a node replayed after a crash works on the same child; a claim whose
checkpoint was lost is found again by the worker (its own unfinished claim comes back first). The stop
rules hold run-wide: they are read from the buffer, whichever worker asks.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Literal

from langgraph.graph import END
from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import ITERATION_FIELDS, WorkerState
from contextevolve.loop.behind import settle
from contextevolve.loop.identity import check_identity
from contextevolve.loop.resources import memory_of, task_of
from contextevolve.loop.steering import steering_of
from contextevolve.loop.stopping import budget_spent_reason, replies_within_budget, stop_reason
from contextevolve.memory.records import ProgramRecord, program_id
from contextevolve.nodes.summarize import write_abstract

_FRESH = {f.name: f for f in fields(WorkerState) if f.name in ITERATION_FIELDS}
_REDUCED = ("iteration_usage", "seconds", "llm_calls")


def fresh_iteration() -> dict:
    """The update that empties every field of the iteration in progress.

    Fields with a reducer are emptied through LangGraph's ``Overwrite``, which bypasses it.
    """
    update = {}
    for name, f in _FRESH.items():
        value = f.default_factory() if callable(f.default_factory) else f.default
        update[name] = Overwrite(value) if name in _REDUCED else value
    return update


def claim(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
    """Claim the next child for this worker, or set ``stop_reason``; first wait while the run is paused.

    ``stop_reason`` is set when a run-wide stop rule holds
    (:func:`~contextevolve.loop.stopping.stop_reason`) or every iteration of the budget is claimed. A child
    stored by an earlier iteration's prompt (one of its ``samples_per_prompt`` replies) comes first, even
    past a stop rule (its tokens are spent): the iteration starts at evaluate with that prompt's parent,
    guidance and exemplars (:func:`sibling_iteration`). Otherwise the claim takes the ids of the prompt's
    other replies too (``sibling_ids``), fewer near a token budget
    (:func:`~contextevolve.loop.stopping.replies_within_budget`).
    """
    ctx = runtime.context
    check_identity(state.run_identity, ctx)
    steering_of(ctx).wait_while_paused()  # a person paused the run: no new iteration until resumed
    task, memory = task_of(ctx), memory_of(ctx)
    # the children it handed over: errors raised, a killed run's finished
    settle(ctx, state.worker, write_abstract)
    spent = memory.buffer.spent()
    workers = ctx.parallelism.workers
    number = memory.buffer.stored_reply(state.worker)
    if number is None:
        reason = stop_reason(ctx, task, memory, spent)
        number = None if reason else memory.buffer.claim(state.worker, ctx.max_iterations)
        if number is None:
            settle(ctx, state.worker, write_abstract, wait=True)  # a worker ends with its children committed
            return {"stop_reason": reason or budget_spent_reason(ctx)}  # the last ids stay readable
    stored = memory.buffer.get(program_id(number))
    if stored is not None and not stored.committed:  # (also one a worker no longer in the run stored)
        return {**fresh_iteration(), **sibling_iteration(stored), "iteration": number - 1,
                "child_id": stored.id, "run_tokens": spent[0], "workers": workers, "stop_reason": None}
    wanted = replies_within_budget(ctx, ctx.search.samples_per_prompt - 1,
                                   (spent[0], memory.buffer.count() - 1), workers)
    more = memory.buffer.claim_more(state.worker, ctx.max_iterations, wanted, number)
    return {**fresh_iteration(), "iteration": number - 1, "child_id": program_id(number),
            "sibling_ids": [program_id(k) for k in more], "run_tokens": spent[0], "workers": workers,
            "stop_reason": None}


def sibling_iteration(child: ProgramRecord) -> dict:
    """The iteration fields of a child an earlier prompt stored: its prompt's ids, and its tokens so far.

    Its record holds the parent, guidance and exemplars of the prompt it was a reply to and the tokens of
    its reply (:mod:`contextevolve.nodes.generate`); the iteration's usage starts from those, so the commit
    books them once.
    """
    return {"ask": "sibling", "parent_id": child.parent_id, "guidance": child.guidance,
            "navigator_guidance": child.navigator_guidance, "candidate_ids": list(child.candidate_ids),
            "exemplar_ids": list(child.exemplar_ids), "context_exemplar_ids": list(child.exemplar_ids),
            "trajectory_ids": list(child.trajectory_ids), "iteration_usage": Overwrite(dict(child.tokens))}


def after_claim(state: WorkerState) -> Literal["select_parent", "evaluate", "__end__"]:
    """Go on to phase 1 with the claimed child, to evaluate with a stored reply, or end the thread."""
    if state.stop_reason:
        return END
    return "evaluate" if state.ask == "sibling" else "select_parent"

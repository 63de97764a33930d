"""Phase 5, Generate: c_c ~ M(· | Φ). Writes the child as a pending record of the Evolve Buffer.

LLM output is untrusted: anything that cannot become a compiling program (no code,
a truncated reply, a diff that does not apply, a syntax error) is a *failed* child with
its reason, never an exception. Endpoint faults — an unreadable or empty response, or a
completion cut off at the token cap before a whole program — are retried first
(``ctx.llm.max_retries``); if they persist the child is failed with the endpoint problem as
its reason and the run goes on. (An endpoint that is down raises
:class:`~contextevolve.llm.faults.EndpointUnavailable` and stops the run.) The child id was
claimed before any LLM call and is in the worker's checkpoint, so replaying this node after a crash
overwrites the same record.

A child that does not compile keeps its source (a repair starts from it); one that could not be
built at all has none. Either is failed here (kind ``edit``) and may go to
:mod:`contextevolve.nodes.repair`. The request itself is :func:`contextevolve.loop.generation.ask_generator`.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.loop.composing import prompt_of
from contextevolve.loop.generation import REPLY_EXCERPT, ask_generator, second_ask, twin_of
from contextevolve.loop.policy import SearchPolicy
from contextevolve.loop.resources import memory_of, task_of
from contextevolve.loop.stopping import worker_budget_spent
from contextevolve.memory.records import ProgramRecord
from contextevolve.program.twins import twin_reason
from contextevolve.roles import add_usage


def generate(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
    """Send the prompt compose chose to the Generator and store the child.

    The prompt is :func:`~contextevolve.loop.composing.prompt_of`'s; the child is stored with status
    pending, or failed with a reason and kind.

    Novelty: a child whose normalised code equals its parent's or a stored program's (a twin) is not
    kept; the Generator is asked once more, in a new conversation that names one concrete mutation
    (:func:`~contextevolve.loop.generation.second_ask`). A second twin, or a first one once the worker has
    spent its share of the token budget (:func:`~contextevolve.loop.stopping.worker_budget_spent`), is a
    failed child of kind ``twin`` whose reason names the twin (it is never evaluated, nor repaired).
    Sampling, including a hotter first ask without guidance, is the iteration's
    :class:`~contextevolve.loop.policy.SearchPolicy`'s.
    """
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    policy = SearchPolicy.of(ctx, state.iteration, state.worker)
    composed = prompt_of(policy, task, memory, state)
    parent = memory.buffer.require(state.parent_id)
    record = ProgramRecord(id=state.child_id, iteration=state.iteration + 1, parent_id=parent.id,
                           worker=state.worker, guidance=state.guidance,
                           exemplar_ids=list(composed.exemplar_ids))
    outcome = ask_generator(ctx, composed.messages(), policy.first(state.guidance), policy,
                            base=parent.source)
    usage, twin = outcome.usage, twin_of(memory, task, outcome, parent)
    record.source = outcome.source
    if twin is not None and not worker_budget_spent(ctx, state, usage):
        outcome = second_ask(ctx, task, parent, policy, policy.second_ask())
        usage, twin = add_usage(usage, outcome.usage), twin_of(memory, task, outcome, parent)
        if outcome.failure != "endpoint":  # (an endpoint fault keeps what the first ask built)
            record.source = outcome.source
    if twin is not None:
        record.source, record.failure_kind, reason = "", "twin", twin_reason(twin)
    elif outcome.failure == "endpoint":
        record.failure_kind, reason = "endpoint", f"endpoint fault: {outcome.problem}"
    elif outcome.failure == "edit":
        record.failure_kind, reason = "edit", f"malformed generator output: {outcome.problem}"
    else:
        reason = ""
    if reason:
        record.status, record.reason = "failed", reason
        record.combined_score = task.worst_score
        record.metrics = {m.name: m.worst for m in task.metrics}
        record.diagnostics = outcome.text[:REPLY_EXCERPT]
    memory.buffer.put(record)
    return {"iteration_usage": usage}  # evaluate, always next, decides repair_due

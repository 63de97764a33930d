"""Phase 5, Generate: c_c ~ M(· | Φ). Writes the child as a pending record of the Evolve Buffer.

LLM output is untrusted: a reply that cannot become a compiling program is a *failed* child of kind ``edit``
with its reason, never an exception; it keeps its source if it has one (a repair,
:mod:`contextevolve.nodes.repair`, starts from it). Endpoint faults are retried (``ctx.llm.max_retries``),
then fail the child; only an endpoint that is down (:class:`~contextevolve.llm.faults.EndpointUnavailable`)
stops the run. The child id was claimed before any LLM call and is in the worker's checkpoint, so a replay
after a crash overwrites the same record.
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

    The prompt is :func:`~contextevolve.loop.composing.prompt_of`'s, the sampling the iteration's
    :class:`~contextevolve.loop.policy.SearchPolicy`'s; the child is stored with status pending, or failed
    with a reason and kind. A twin of the parent or a stored program is not kept: the Generator is asked
    once more (:func:`~contextevolve.loop.generation.second_ask`). A second twin, or a first once the
    worker has spent its share of the token budget
    (:func:`~contextevolve.loop.stopping.worker_budget_spent`), is a failed child of kind ``twin``, never
    evaluated nor repaired (docs/decisions/second-ask.md). A child whose ``ask`` is ``mutation`` gets that
    second ask's request alone, once (docs/decisions/copied-parent-ask.md).
    """
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    policy = SearchPolicy.of(ctx, state.iteration, state.worker)
    parent = memory.buffer.require(state.parent_id)
    record = ProgramRecord(id=state.child_id, iteration=state.iteration + 1, parent_id=parent.id,
                           worker=state.worker, guidance=state.guidance,
                           navigator_guidance=state.navigator_guidance,
                           exemplar_ids=list(state.context_exemplar_ids),
                           candidate_ids=list(state.candidate_ids), trajectory_ids=list(state.trajectory_ids))
    if state.ask == "mutation":  # the parent's last child was a copy: one short ask, no other
        outcome = second_ask(ctx, task, parent, policy, policy.second_ask())
    else:
        outcome = ask_generator(ctx, prompt_of(policy, task, memory, state).messages(),
                                policy.first(state.guidance), policy, base=parent.source)
    usage, twin = outcome.usage, twin_of(memory, task, outcome, parent)
    record.source, record.mutation = outcome.source, outcome.mutation
    if twin is not None and state.ask == "full" and not worker_budget_spent(ctx, state, usage):
        outcome = second_ask(ctx, task, parent, policy, policy.second_ask())
        usage, twin = add_usage(usage, outcome.usage), twin_of(memory, task, outcome, parent)
        record.mutation = outcome.mutation
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

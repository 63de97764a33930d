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
built at all has none. Either is failed here (kind ``edit``) and may go to :mod:`contextevolve.nodes.repair`.
The request itself is :func:`contextevolve.nodes.ask.ask_generator`.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.memory.records import ProgramRecord
from contextevolve.nodes.ask import REPLY_EXCERPT, SamplingPolicy, ask_generator, reask_mode, twin_of, twin_reason
from contextevolve.nodes.compose import load, render
from contextevolve.nodes.resources import memory_of, task_of
from contextevolve.nodes.stopping import worker_budget_spent
from contextevolve.prompts.generator import reask_messages
from contextevolve.roles import add_usage


def generate(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
    """Ask the Generator for the child and store it (status pending, or failed with a reason and kind).

    Novelty: a child whose normalised code equals its parent's or a buffered program's (a twin)
    is not kept; the Generator is asked once more, in a new conversation that names one concrete
    mutation (:func:`~contextevolve.prompts.generator.reask_messages`), hotter and with another seed
    (:meth:`~contextevolve.nodes.ask.SamplingPolicy.second_ask`): a small model shown its own copy and
    told "make a real change" tends to copy the program again. A second twin, or a first one once the
    worker has spent its share of the token budget (:func:`~contextevolve.nodes.stopping.worker_budget_spent`),
    is a failed child of kind ``twin`` whose reason names the twin (it is never evaluated, nor repaired).

    When the Navigator gave no guidance (the first iteration, or a reply it could not use) the first ask is
    ``search.unguided_hotter`` hotter: with no direction the model mostly copies its parent. Not with the
    Navigator switched off, so that ablation changes one thing.
    """
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    parent, exemplars = load(memory, state.parent_id, state.context_exemplar_ids)
    messages = render(ctx, task, parent, state.guidance, exemplars, set(state.exemplar_code_ids))
    child_id = state.child_id
    record = ProgramRecord(id=child_id, iteration=state.iteration + 1, parent_id=parent.id, worker=state.worker,
                           guidance=state.guidance, exemplar_ids=list(state.context_exemplar_ids))
    policy, mode = SamplingPolicy.of(ctx, state.iteration, state.worker), ctx.search.generation_mode
    unguided = ctx.search.unguided_hotter if ctx.ablations.navigator_enabled and not state.guidance.strip() else 0.0
    outcome = ask_generator(ctx, messages, policy.first(hotter=unguided), base=parent.source, mode=mode)
    usage, twin = outcome.usage, twin_of(memory, task, outcome, parent)
    record.source = outcome.source
    if twin is not None and not worker_budget_spent(ctx, state, usage):
        mode = reask_mode(mode)
        messages = reask_messages(task.description, parent.source, policy.mutation(), task.higher_is_better, mode)
        outcome = ask_generator(ctx, messages, policy.second_ask(), base=parent.source, mode=mode,
                                docstrings_hidden=True)
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

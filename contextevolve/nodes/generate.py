"""Phase 5, Generate: c_c ~ M(· | Φ). Writes the child as a pending record of the Evolve Buffer.

LLM output is untrusted: a reply that cannot become a compiling program is a *failed* child of kind ``edit``
with its reason, never an exception; it keeps its source if it has one (a repair,
:mod:`contextevolve.nodes.repair`, starts from it). Endpoint faults are retried (``ctx.llm.max_retries``),
then fail the child; only an endpoint that is down (:class:`~contextevolve.llm.faults.EndpointUnavailable`)
stops the run. The child id was claimed before any LLM call and is in the worker's checkpoint, so a replay
after a crash overwrites the same record.
"""

from __future__ import annotations

from functools import reduce

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.loop import requests
from contextevolve.loop.composing import prompt_of
from contextevolve.loop.generation import REPLY_EXCERPT, twin_of
from contextevolve.loop.policy import SearchPolicy
from contextevolve.loop.resources import memory_of, task_of
from contextevolve.loop.stopping import worker_budget_spent
from contextevolve.memory.records import ProgramRecord, iteration_of
from contextevolve.program.twins import twin_reason
from contextevolve.roles import add_usage


def generate(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
    """Send the prompt compose chose to the Generator and store its replies, each a child.

    The prompt is :func:`~contextevolve.loop.composing.prompt_of`'s, sent as a ``first`` request
    (:mod:`contextevolve.loop.requests`) for one reply per id claimed for it: the iteration's child and
    ``sibling_ids`` (``search.samples_per_prompt``). The siblings are evaluated by the worker's next
    iterations (:func:`~contextevolve.nodes.claim.claim`); they keep the tokens of their own reply on their
    record and name the iteration's child as the prompt they share (``sibling_of``). The replies that are
    twins (the parent, a stored program or an earlier reply again) get one second ask together, one choice
    each (:func:`~contextevolve.loop.requests.second_ask`), unless the worker has spent its share of the
    token budget with the prompt's replies (:func:`~contextevolve.loop.stopping.worker_budget_spent`, every
    reply's tokens counted); each second ask's outcome replaces its twin's (after an endpoint fault the child
    keeps the first reply's source and fails with the fault). A child still a twin after its second ask is
    failed, of kind ``twin``, never evaluated nor repaired (docs/decisions/second-ask.md); every child is
    stored pending, or failed with a reason and kind.
    """
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    policy = SearchPolicy.of(ctx, state.iteration, state.worker)
    parent = memory.buffer.require(state.parent_id)
    ids = [state.child_id, *state.sibling_ids]
    messages = prompt_of(policy, task, memory, state).messages()
    outcomes = requests.send(ctx, requests.first(policy, messages, state.guidance, parent.source, len(ids)))
    records, twins = [], []
    for number, (child_id, outcome) in enumerate(zip(ids, outcomes, strict=True)):
        record = _record(state, parent, child_id)
        record.source = outcome.source
        if number:
            record.sibling_of, record.tokens = state.child_id, dict(outcome.usage)
        twins.append(twin_of(memory, task, outcome, parent, _others(records, twins)))
        records.append(record)
    usage = outcomes[0].usage
    copies = [number for number, twin in enumerate(twins) if twin is not None]
    if copies and not worker_budget_spent(ctx, state, reduce(add_usage, (o.usage for o in outcomes))):
        again = requests.send(ctx, requests.second_ask(task, parent, policy, n=len(copies)))
        for number, outcome in zip(copies, again, strict=True):
            record = records[number]
            if number:
                record.tokens = add_usage(record.tokens, outcome.usage)
            else:
                usage = add_usage(usage, outcome.usage)
            record.mutation = outcome.mutation
            if outcome.failure != "endpoint":  # (an endpoint fault keeps what the first ask built)
                record.source = outcome.source
            outcomes[number] = outcome
            twins[number] = twin_of(memory, task, outcome, parent, _others(records, twins, but=number))
    for record, outcome, twin in zip(records, outcomes, twins, strict=True):
        memory.buffer.put(_settled(task, record, outcome, twin))
    return {"iteration_usage": usage}  # evaluate, always next, decides repair_due


def _others(records: list[ProgramRecord], twins: list, but: int = -1) -> tuple[ProgramRecord, ...]:
    """The replies to the same prompt so far that are programs of their own (a new one must differ)."""
    return tuple(r for i, (r, twin) in enumerate(zip(records, twins)) if i != but and twin is None
                 and r.source)


def _record(state: WorkerState, parent: ProgramRecord, child_id: str) -> ProgramRecord:
    """A new record of ``child_id``, a child of ``parent`` asked for with the iteration's context."""
    return ProgramRecord(id=child_id, iteration=iteration_of(child_id), parent_id=parent.id,
                         worker=state.worker, guidance=state.guidance,
                         navigator_guidance=state.navigator_guidance,
                         exemplar_ids=list(state.context_exemplar_ids),
                         candidate_ids=list(state.candidate_ids), trajectory_ids=list(state.trajectory_ids))


def _settled(task, record: ProgramRecord, outcome, twin: str | None) -> ProgramRecord:
    """``record`` as its ``outcome`` leaves it: pending with its source, or failed with a reason and kind."""
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
    return record

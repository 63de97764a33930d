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
    """Send the prompt compose chose to the Generator and store the child, and the prompt's other replies.

    The prompt is :func:`~contextevolve.loop.composing.prompt_of`'s, sent as a ``first`` request
    (:mod:`contextevolve.loop.requests`); the child is stored with status pending, or failed
    with a reason and kind. With ids claimed for the prompt's other replies (``sibling_ids``,
    ``search.samples_per_prompt``) the prompt is asked for that many more replies at once and each is stored
    as a child of its own under its id (:func:`_store_replies`), to be evaluated by the worker's next
    iterations. With one reply, a twin of the parent or a stored program is not kept: the Generator is asked
    once more (:func:`~contextevolve.loop.requests.second_ask`). A second twin, or a first once the
    worker has spent its share of the token budget
    (:func:`~contextevolve.loop.stopping.worker_budget_spent`), is a failed child of kind ``twin``, never
    evaluated nor repaired (docs/decisions/second-ask.md).
    """
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    policy = SearchPolicy.of(ctx, state.iteration, state.worker)
    parent = memory.buffer.require(state.parent_id)
    if state.sibling_ids:
        return _store_replies(ctx, state, policy, parent)
    record = _record(state, parent, state.child_id)
    outcome, = requests.send(ctx, _first_request(ctx, policy, state, parent, 1))
    usage, twin = outcome.usage, twin_of(memory, task, outcome, parent)
    record.source = outcome.source
    if twin is not None and not worker_budget_spent(ctx, state, usage):
        outcome, = requests.send(ctx, requests.second_ask(task, parent, policy))
        usage, twin = add_usage(usage, outcome.usage), twin_of(memory, task, outcome, parent)
        record.mutation = outcome.mutation
        if outcome.failure != "endpoint":  # (an endpoint fault keeps what the first ask built)
            record.source = outcome.source
    memory.buffer.put(_settled(task, record, outcome, twin))
    return {"iteration_usage": usage}  # evaluate, always next, decides repair_due


def _store_replies(ctx: RunContext, state: WorkerState, policy: SearchPolicy, parent: ProgramRecord) -> dict:
    """Ask the composed prompt for one reply per claimed id and store each as a child.

    The first is the iteration's child; the others keep the tokens of their own reply on their record (the
    worker's iteration that evaluates one starts from them, :func:`~contextevolve.nodes.claim.claim`) and
    name the first as the prompt they share (``sibling_of``). A reply that is a twin of the parent, of a
    stored program or of an earlier reply is a failed child of kind ``twin``: no second ask, since the
    prompt's other replies are the new tries.
    """
    task, memory = task_of(ctx), memory_of(ctx)
    ids = [state.child_id, *state.sibling_ids]
    outcomes = requests.send(ctx, _first_request(ctx, policy, state, parent, len(ids)))
    stored: list[ProgramRecord] = []
    for number, (child_id, outcome) in enumerate(zip(ids, outcomes, strict=True)):
        record = _record(state, parent, child_id)
        record.source = outcome.source
        if number:
            record.sibling_of, record.tokens = state.child_id, dict(outcome.usage)
        twin = twin_of(memory, task, outcome, parent, tuple(r for r in stored if r.source))
        record = _settled(task, record, outcome, twin)
        memory.buffer.put(record)
        stored.append(record)
    return {"iteration_usage": outcomes[0].usage}


def _first_request(ctx: RunContext, policy: SearchPolicy, state: WorkerState, parent: ProgramRecord,
                   n: int) -> requests.GeneratorRequest:
    """The iteration's first request: the prompt compose chose, for ``n`` children of ``parent``."""
    messages = prompt_of(policy, task_of(ctx), memory_of(ctx), state).messages()
    return requests.first(policy, messages, state.guidance, parent.source, n)


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

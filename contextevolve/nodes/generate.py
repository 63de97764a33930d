"""Phase 5, Generate: c_c ~ M(· | Φ). Writes the child as a pending record of the Evolve Buffer.

LLM output is untrusted: anything that cannot become a compiling program (no code,
a truncated reply, a diff that does not apply, a syntax error) is a *failed* child with
its reason, never an exception. Endpoint faults — an unreadable or empty response, or a
completion cut off at the token cap before a whole program — are retried first
(``ctx.llm.max_retries``); if they persist the child is failed with the endpoint problem as
its reason and the run goes on. (An endpoint that is down raises
:class:`~contextevolve.llm.faults.EndpointUnavailable` and stops the run.) The child id is
derived from the iteration number, so replaying this node after a crash overwrites the same record.

A child that does not compile keeps its source (a repair starts from it); one that could not be
built at all has none. Either is failed here and may go to :mod:`contextevolve.nodes.repair`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from langgraph.runtime import Runtime

from contextevolve.editing import EditError, build_child, normalized_code
from contextevolve.graph.context import RunContext
from contextevolve.graph.state import LaneState
from contextevolve.llm.calls import MalformedReply, Reply, call_role
from contextevolve.memory.records import ProgramRecord, program_id
from contextevolve.memory.store import RunMemory
from contextevolve.nodes.compose import load, render
from contextevolve.nodes.resources import memory_of, task_of
from contextevolve.prompts.generator import mutation_for, reask_messages, stop_after_code
from contextevolve.roles import TokenUsage, add_usage

REPLY_EXCERPT = 600
"""Characters of a failed reply kept in the record's diagnostics."""
REASK_HOTTER = 0.3
"""Temperature added to the Generator's for the second ask after a twin."""


def whole_program(parent_source: str, mode: str) -> Callable[[Reply], None]:
    """A ``call_role`` check: a truncated reply must still yield a complete program, else it is retried.

    Raises (from the returned check):
        MalformedReply: the reply was cut off (``finish_reason="length"``) and no program can be built from it.
    """
    def check(reply: Reply) -> None:
        if not reply.truncated:
            return
        try:
            build_child(parent_source, reply.text, mode, truncated=True)
        except EditError as exc:
            raise MalformedReply(f"completion cut off at the token cap (finish_reason=length): {exc}",
                                 text=reply.text) from None
    return check


def find_twin(memory: RunMemory, source: str, parent: ProgramRecord, entry: str | None = None) -> str | None:
    """Id of the parent or a committed program whose normalised code equals ``source``'s, else None
    (:func:`~contextevolve.editing.normalized_code`: AST without docstrings, comments, unused
    imports and, given the task's ``entry`` function name, helpers nothing calls)."""
    digest = normalized_code(source, entry)
    if digest is None:
        return None
    for record in [parent, *memory.buffer.committed()]:
        if record.source and normalized_code(record.source, entry) == digest:
            return record.id
    return None


def twin_reason(twin: str) -> str:
    """Reason of a child not evaluated because it is the same program as ``twin``."""
    return (f"duplicate of {twin} (the same code apart from comments, docstrings, unused imports and "
            f"uncalled helpers); not evaluated")


def reask_mode(mode: str) -> str:
    """Edit form of the second ask after a twin: the changed functions in ``functions`` mode, else the
    whole program (SEARCH/REPLACE edits asked again made fewer valid children, see
    :func:`~contextevolve.prompts.generator.reask_messages`)."""
    return "functions" if mode == "functions" else "full"


def repairable(reason: str) -> bool:
    """True when a failure with ``reason`` is the program's fault, so a repair may fix it (not an
    endpoint fault, not a duplicate)."""
    return not reason.startswith(("endpoint fault", "duplicate of"))


def generate(state: LaneState, runtime: Runtime[RunContext]) -> dict:
    """Ask the Generator for the child and store it (status pending, or failed with a reason).

    Novelty: a child whose normalised code equals its parent's or a buffered program's
    is not kept; the Generator is asked once more, in a new conversation that names one concrete
    mutation (:func:`~contextevolve.prompts.generator.reask_messages`), and a second twin is a failed
    child whose reason names the twin (it is never evaluated, nor repaired).
    """
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    parent, exemplars = load(memory, state.parent_id, state.context_exemplar_ids)
    messages = render(ctx, task, parent, state.guidance, exemplars, set(state.exemplar_code_ids))
    child_id = program_id(state.iteration + 1)
    record = ProgramRecord(id=child_id, iteration=state.iteration + 1, parent_id=parent.id,
                           guidance=state.guidance, exemplar_ids=list(state.context_exemplar_ids))
    usage: TokenUsage = {}
    for ask in range(2):
        reason, text, twin = "", "", None
        try:
            mode = reask_mode(ctx.search.generation_mode) if ask else ctx.search.generation_mode
            reply = call_role("generator", messages, ctx, check=whole_program(parent.source, mode),
                              stop=stop_after_code(mode, ctx))
            usage, text = add_usage(usage, reply.usage), reply.text
            record.source = build_child(parent.source, reply.text, mode, truncated=reply.truncated)
            twin = find_twin(memory, record.source, parent, task.job().entry or None)
        except MalformedReply as exc:  # the endpoint's fault, after the retries
            usage, text, reason = add_usage(usage, exc.usage), exc.text, f"endpoint fault: {exc}"
        except EditError as exc:  # the model's fault
            twin = parent.id if exc.duplicate else None
            reason = "" if exc.duplicate else f"malformed generator output: {exc}"
            record.source = exc.source
        if twin is None or ask == 1:
            break
        # Once more, hotter, with another seed and in a new conversation naming one concrete change: a
        # small model shown its own copy and told "make a real change" tends to copy the program again.
        messages = reask_messages(task.description, parent.source, mutation_for(ctx.seed, state.iteration),
                                  task.higher_is_better, reask_mode(ctx.search.generation_mode))
        hotter = ctx.llm.temperature_for("generator") + REASK_HOTTER
        ctx = replace(ctx, seed=ctx.seed + 1 + state.iteration, temperatures={**ctx.llm.temperatures, "generator": hotter})
    if twin is not None:
        reason, record.source = twin_reason(twin), ""
    if reason:
        record.status, record.reason = "failed", reason
        record.combined_score = task.worst_score
        record.metrics = {m.name: m.worst for m in task.metrics}
        record.diagnostics = text[:REPLY_EXCERPT]
    memory.buffer.put(record)
    return {"child_id": child_id, "child_status": record.status, "child_score": None, "repairs": 0,
            "iteration_usage": usage}  # evaluate, always next, decides repair_due

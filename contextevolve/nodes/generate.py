"""Phase 5, Generate: c_c ~ M(· | Φ). Writes the child as a pending record of the Evolve Buffer.

LLM output is untrusted: anything that cannot become a compiling program (no code,
a truncated reply, a diff that does not apply, a syntax error) is a *failed* child with
its reason, never an exception. The child id is derived from the iteration number, so
replaying this node after a crash overwrites the same record.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from contextevolve.editing import EditError, build_child
from contextevolve.graph.context import RunContext
from contextevolve.graph.state import LaneState
from contextevolve.llm.calls import call_role
from contextevolve.memory.records import ProgramRecord, program_id
from contextevolve.nodes.compose import load, render
from contextevolve.nodes.resources import memory_of, task_of

REPLY_EXCERPT = 600
"""Characters of a failed reply kept in the record's diagnostics."""


def generate(state: LaneState, runtime: Runtime[RunContext]) -> dict:
    """Ask the Generator for the child and store it (status pending, or failed with a reason)."""
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    parent, exemplars = load(memory, state.parent_id, state.exemplar_ids)
    messages = render(ctx, task, parent, state.guidance, exemplars, set(state.exemplar_code_ids))
    reply = call_role("generator", messages, ctx)
    child_id = program_id(state.iteration + 1)
    record = ProgramRecord(id=child_id, iteration=state.iteration + 1, parent_id=parent.id,
                           guidance=state.guidance, exemplar_ids=list(state.exemplar_ids))
    try:
        record.source = build_child(parent.source, reply.text, ctx.generation_mode, truncated=reply.truncated)
    except EditError as exc:
        record.status, record.reason = "failed", f"malformed generator output: {exc}"
        record.combined_score = task.worst_score
        record.metrics = {m.name: m.worst for m in task.metrics}
        record.diagnostics = reply.text[:REPLY_EXCERPT]
    memory.buffer.put(record)
    return {"child_id": child_id, "child_status": record.status, "child_score": None,
            "iteration_usage": reply.usage}

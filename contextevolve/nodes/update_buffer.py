"""Phase 8, Buffer update: B_e ← B_e ∪ {(c_p, s_p, z_p; c_c, s_c, z_c)} for the worker's child."""

from __future__ import annotations

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.loop.identity import check_identity
from contextevolve.loop.resources import memory_of
from contextevolve.timing import LLMCall


def update_buffer(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
    """Commit the worker's child with the iteration's tokens, seconds and LLM calls.

    From now on it is a parent, an exemplar and a step the Navigator may be shown, for every worker.
    Idempotent: replaying it after a crash rewrites the same record and yields the same counters. With
    the Summarizer behind the worker (:mod:`contextevolve.loop.behind`) the commit is the handed-over
    job's.
    """
    ctx = runtime.context
    check_identity(state.run_identity, ctx)
    # summarize handed the child over: it is committed once its abstract is written
    if ctx.summarizes_behind:
        return {"committed": state.committed + 1, "last_child_id": state.child_id}
    memory = memory_of(ctx)
    child = memory.buffer.require(state.child_id)
    child.tokens = dict(state.iteration_usage)
    child.seconds = dict(state.seconds)
    child.llm_calls = [LLMCall.model_validate(c) for c in state.llm_calls]
    child.worker = state.worker
    memory.commit(child)
    return {"committed": state.committed + 1, "last_child_id": child.id}

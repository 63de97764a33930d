"""Initialize (Algorithm 1, line 3): B_e ← {(c_0, s_0, z_0)}: evaluate and summarise program c_0.

Every worker's thread starts here. The first to arrive evaluates and abstracts c_0 and commits it; the
others wait for it (:attr:`~contextevolve.memory.store.RunMemory.seeding`) and find it committed, as does
a resumed or extended run, which therefore only binds its thread to its worker index.
"""

from __future__ import annotations

from langgraph.config import get_config
from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.loop.identity import check_identity, run_identity
from contextevolve.loop.resources import memory_of, task_of
from contextevolve.memory.records import ProgramRecord, program_id
from contextevolve.memory.store import RunMemory
from contextevolve.nodes.evaluate import run_evaluation
from contextevolve.nodes.summarize import abstract_for
from contextevolve.tasks.base import Task
from contextevolve.timing import phase_clock


def _thread_id() -> str | None:
    """The LangGraph thread this node runs in (None outside a graph, or without a checkpointer)."""
    try:
        return (get_config().get("configurable") or {}).get("thread_id")
    except RuntimeError:  # called directly, not by LangGraph
        return None


def seed_initial(ctx: RunContext, task: Task, memory: RunMemory) -> ProgramRecord:
    """The committed record of c_0: evaluated, abstracted and committed by the first worker to ask."""
    with memory.seeding:
        record = memory.buffer.get(program_id(0))
        if record is not None and record.committed:
            return record
        source = task.initial_program
        with phase_clock("initialize") as watch:
            evaluation = run_evaluation(ctx, source)
            abstract, spent = abstract_for(ctx, task, source, parent_abstract=None,
                                           diagnostics=evaluation.diagnostics)
        return memory.commit(ProgramRecord(
            id=program_id(0), iteration=0, source=source, abstract=abstract, metrics=evaluation.metrics,
            combined_score=evaluation.combined_score, status=evaluation.status, reason=evaluation.reason,
            failure_kind=evaluation.failure_kind, diagnostics=evaluation.diagnostics,
            outputs_digest=evaluation.outputs_digest, eval_seconds=evaluation.seconds, tokens=spent,
            seconds=watch.seconds,
            llm_calls=list(watch.calls)))


def initialize(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
    """Seed the Evolve Buffer with c_0 unless it is there, and bind this thread to its worker index.

    The index (:meth:`~contextevolve.memory.buffer.EvolveBuffer.bind_worker`) is the one it had, the one
    its input asks for, or the lowest free one.

    Raises:
        ThreadMismatchError: the thread drives another run.
        ValueError: the input asks for a worker index another thread holds.
    """
    ctx = runtime.context
    check_identity(state.run_identity, ctx)
    task, memory = task_of(ctx), memory_of(ctx)
    thread = _thread_id()
    worker = memory.buffer.bind_worker(str(thread), state.worker) if thread is not None else state.worker or 0
    record = seed_initial(ctx, task, memory)
    return {"worker": worker, "initial_id": record.id, "run_identity": run_identity(ctx), "stop_reason": None}

"""Initialize (Algorithm 1, line 3): B_e ← {(c_0, s_0, z_0)} — evaluate and summarise the initial program.

Idempotent: on a run whose buffer already holds c_0 it only restores the scoreboard and
re-checks the stop condition (so extending a finished run with more iterations works).
"""

from __future__ import annotations

from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import EvolveState
from contextevolve.memory.records import ProgramRecord, program_id
from contextevolve.nodes.evaluate import run_evaluation
from contextevolve.nodes.identity import ThreadMismatchError, check_identity, run_identity
from contextevolve.nodes.resources import memory_of, task_of
from contextevolve.nodes.stopping import round_size, stop_reason
from contextevolve.nodes.summarize import abstract_for
from contextevolve.roles import add_usage, total_tokens
from contextevolve.timing import add_seconds, phase_clock


def _thread_id() -> str | None:
    """The LangGraph thread this node runs in (None when called outside a graph, or without a checkpointer)."""
    try:
        return (get_config().get("configurable") or {}).get("thread_id")
    except RuntimeError:  # called directly, not by LangGraph
        return None


def initialize(state: EvolveState, runtime: Runtime[RunContext]) -> dict:
    """Seed the Evolve Buffer with c_0 (evaluated and abstracted) unless it is already there.

    The first thread to initialize a run directory owns it (kept in the buffer): another thread
    is refused rather than "finishing" at once on the other's iterations.

    Raises:
        ThreadMismatchError: the thread drives another run, or the run directory belongs to another thread.
    """
    ctx = runtime.context
    check_identity(state.run_identity, ctx)
    task, memory = task_of(ctx), memory_of(ctx)
    thread = _thread_id()
    owner = memory.buffer.bind_thread(str(thread)) if thread is not None else None
    if owner is not None and owner != str(thread):
        raise ThreadMismatchError(
            f"{ctx.run_dir} holds the run of LangGraph thread {owner!r}; continue that thread (evolve(..., "
            f"resume=True) or `contextevolve run --resume`), or give thread {str(thread)!r} a new run_dir")
    first = program_id(0)
    record = memory.buffer.get(first)
    usage, seconds, elapsed = dict(state.total_usage), dict(state.total_seconds), state.elapsed_s
    if record is None or not record.committed:
        source = task.initial_program
        with phase_clock("initialize") as watch:
            evaluation = run_evaluation(ctx, source)
            abstract, spent = abstract_for(ctx, task, source, parent_abstract=None, diagnostics=evaluation.diagnostics)
        record = memory.commit(ProgramRecord(
            id=first, iteration=0, source=source, abstract=abstract, metrics=evaluation.metrics,
            combined_score=evaluation.combined_score, status=evaluation.status, reason=evaluation.reason,
            failure_kind=evaluation.failure_kind, diagnostics=evaluation.diagnostics, eval_seconds=evaluation.seconds, tokens=spent,
            seconds=watch.seconds, llm_calls=list(watch.calls)))
        usage = add_usage(usage, spent)
        seconds = add_seconds(seconds, watch.seconds)
        elapsed = round(elapsed + watch.seconds["initialize"], 3)
    best = memory.buffer.best(task.higher_is_better) or record
    iteration = max(state.iteration, memory.buffer.max_iteration())
    if iteration > state.iteration:  # a round committed to the buffer whose checkpoint was lost:
        usage = memory.buffer.token_usage()  # the buffer, the source of truth, counts its tokens
    return {
        "iteration": iteration,
        "initial_id": record.id,
        "initial_score": record.combined_score,
        "initial_failure": f"{record.status}: {record.reason}"[:300] if record.status != "ok" else "",
        "best_id": best.id,
        "best_score": best.combined_score,
        "total_usage": usage,
        "total_seconds": seconds,
        "elapsed_s": elapsed,
        "round_size": round_size(ctx, iteration),
        # a round abandoned by new input on the thread (its pending sends dropped) is forgotten: its
        # uncommitted children are made again by the next round (committed ones are counted above)
        "lane_results": Overwrite([]),
        "lanes": Overwrite([]),
        "run_identity": run_identity(ctx),
        "stop_reason": stop_reason(ctx, task, iteration, best.combined_score, total_tokens(usage), elapsed),
    }

"""The Summarizer behind its worker: a child is summarized and committed while its worker goes on.

With ``RunContext.summarizes_behind`` (on by default with several workers) the worker hands its child over
(:meth:`~contextevolve.memory.buffer.EvolveBuffer.hand_over`: the iteration's tokens, seconds and LLM calls go
on the record, the claim is marked handed over) and a thread of this process writes the abstract and commits
the child. A child handed over but not committed when the process died is finished by its worker's next
``claim`` (:func:`settle`), which also raises a job's error in the worker and, before the worker stops, waits
for its jobs. Why: docs/architecture.md, *The compiled graph*.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.loop.resources import memory_of
from contextevolve.memory.records import program_id
from contextevolve.roles import TokenUsage, add_usage
from contextevolve.timing import LLMCall, add_seconds, phase_clock

_POOL: ThreadPoolExecutor | None = None
_JOBS: dict[tuple[str, str], tuple[int, Future]] = {}
"""(run directory, child id) -> (worker, the job finishing it), for the jobs of this process."""
_LOCK = threading.Lock()


def _key(ctx: RunContext, child_id: str) -> tuple[str, str]:
    return str(Path(ctx.run_dir).resolve()), child_id


Writer = Callable[[RunContext, str], TokenUsage]
"""What writes a child's abstract into its record and returns the Summarizer's tokens
(:func:`contextevolve.nodes.summarize.write_abstract`)."""


def finish(ctx: RunContext, child_id: str, write: Writer) -> None:
    """Write the abstract of the handed-over child ``child_id`` with ``write`` and commit it.

    Its Summarizer call is added to the tokens, seconds and LLM calls stored on it. Idempotent (a
    committed child is left as it is).

    Raises:
        contextevolve.llm.faults.EndpointUnavailable: the Summarizer's endpoint is down.
    """
    memory = memory_of(ctx)
    if memory.buffer.require(child_id).committed:
        return
    with phase_clock("summarize") as watch:
        usage = write(ctx, child_id)
    child = memory.buffer.require(child_id)
    child.tokens = add_usage(child.tokens, usage)
    # "summarize.behind": of the phase, the seconds behind the worker (not its elapsed time: it went on)
    child.seconds = add_seconds(child.seconds,
                                {**watch.seconds, "summarize.behind": watch.seconds["summarize"]})
    child.llm_calls = [*child.llm_calls, *watch.calls]
    memory.commit(child)


def hand_over(ctx: RunContext, state: WorkerState, write: Writer) -> None:
    """Hand the worker's child over to a thread of this process, which finishes it (:func:`finish`).

    The iteration's tokens, seconds and LLM calls are stored on the child and its claim is marked handed
    over first.
    """
    global _POOL
    memory = memory_of(ctx)
    memory.buffer.update(state.child_id, tokens=dict(state.iteration_usage), seconds=dict(state.seconds),
                         llm_calls=[LLMCall.model_validate(c) for c in state.llm_calls], worker=state.worker)
    memory.buffer.hand_over(state.iteration + 1)
    with _LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=32, thread_name_prefix="summarize-behind")
        _JOBS[_key(ctx, state.child_id)] = (state.worker, _POOL.submit(finish, ctx, state.child_id, write))


def settle(ctx: RunContext, worker: int, write: Writer, *, wait: bool = False) -> None:
    """Settle ``worker``'s handed-over children before it claims again.

    Forget its finished jobs, raising the first one's error; with ``wait``, wait for all its jobs first;
    then finish (here, synchronously) its handed-over children no job of this process is finishing,
    those of a run that was killed while they were being summarized.

    Raises:
        Whatever a job raised (e.g. ``EndpointUnavailable``).
    """
    run = str(Path(ctx.run_dir).resolve())
    with _LOCK:
        mine = {key: future for key, (owner, future) in _JOBS.items() if key[0] == run and owner == worker}
    for key, future in mine.items():
        if wait or future.done():
            with _LOCK:
                _JOBS.pop(key, None)
            future.result()
    with _LOCK:
        busy = {key[1] for key in _JOBS if key[0] == run}
    for iteration in memory_of(ctx).buffer.handed_over(worker):
        if program_id(iteration) not in busy:
            finish(ctx, program_id(iteration), write)


def drain(run_dir: str | Path) -> None:
    """Wait for every job of the run in ``run_dir`` and forget them; called before its memory is closed.

    Errors are left to the next resume, which finishes what the jobs did not.
    """
    run = str(Path(run_dir).resolve())
    with _LOCK:
        jobs = {key: future for key, (_, future) in _JOBS.items() if key[0] == run}
    for key, future in jobs.items():
        try:
            future.result()
        except Exception:  # noqa: BLE001 - see docstring
            pass
        with _LOCK:
            _JOBS.pop(key, None)

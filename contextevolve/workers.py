"""A run's workers, driven side by side in this process: one LangGraph thread of the run's graph each.

Each worker streams its own thread (``worker-<i>``) until its ``claim`` finds a stop rule holding; the
workers share the run's Evolve Buffer, vector index, chat models and executor, and nothing else: no
barrier, so one worker's evaluation overlaps the others' LLM calls. What a node writes and which node
starts is handed to the caller's callbacks one at a time (they are called under one lock).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from contextevolve.graph.context import RunContext
from contextevolve.loop.steering import steering_of
from contextevolve.memory.records import program_id
from contextevolve.memory.store import open_memory
from contextevolve.roles import total_tokens
from contextevolve.timing import wall

CHECKPOINT_FILE = "checkpoints.sqlite"
"""The run directory's LangGraph checkpoints: one thread per worker (:func:`worker_thread`)."""


class StaleCheckpointError(ValueError):
    """A worker's thread waits at a node this version's graph does not have."""


def worker_thread(worker: int) -> str:
    """The LangGraph thread id of worker ``worker`` of a run driven by :func:`contextevolve.api.evolve`."""
    return f"worker-{worker}"


def _field(value: Any, name: str, default: Any) -> Any:
    """``value.name`` or ``value[name]`` (a node's input is a state object or a plain dict)."""
    if isinstance(value, dict):
        return value.get(name, default)
    return getattr(value, name, default)


def _written(result: Any) -> dict:
    """What a node wrote, from a ``tasks`` stream event's result, without LangGraph's own channels.

    The result is a dict, or a list of (channel, value) writes; branch triggers and sends are dropped.
    """
    if isinstance(result, dict):
        return dict(result)
    if isinstance(result, list):
        return {key: value for key, value in result
                if isinstance(key, str) and not key.startswith(("__", "branch:"))}
    return {}


def commit_report(ctx: RunContext, child_id: str) -> dict:
    """What the progress display says of a committed program, read from its record and the buffer.

    Keys: ``child_id``, ``worker``, ``status``, ``score``, ``reason``, ``repairs``, ``twin_of`` (the program
    whose results a behavioural twin equals, else ``""``), ``asked_again`` (the Generator was asked again
    after a version changed no result), ``sibling_of`` (the first child of the prompt it was a later reply
    to, else ``""``), ``usage`` (tokens by
    role), ``tokens``, ``cost`` (dollars, None without prices), ``seconds`` (its wall seconds),
    ``iterations`` (children committed so far), ``best_score``, ``run_tokens`` (every committed program's
    tokens) and ``run_cost``.
    """
    from contextevolve.llm.pricing import cost
    from contextevolve.tasks.registry import get_task

    memory = open_memory(ctx.run_dir, chroma_url=ctx.chroma_url)
    record = memory.buffer.require(child_id)
    best = memory.buffer.best_by(get_task(ctx.task).better)
    return {"child_id": record.id, "worker": record.worker, "status": record.status,
            "score": record.combined_score, "reason": record.reason,
            "repairs": len(record.repairs),
            "twin_of": record.behavioural_twin_of,
            "asked_again": record.asked_after_no_effect, "sibling_of": record.sibling_of,
            "usage": record.tokens, "tokens": total_tokens(record.tokens), "cost": cost(ctx, record.tokens),
            "seconds": wall(record.seconds), "iterations": memory.buffer.count() - 1,
            "best_score": best.combined_score if best else None, "run_tokens": memory.buffer.spent()[0],
            "run_cost": cost(ctx, memory.buffer.token_usage()) if ctx.llm.prices else None}


class Workers:
    """The workers of one run (``ctx.parallelism.workers`` of them) over a compiled, checkpointed graph."""

    def __init__(self, graph, ctx: RunContext, root: Path, *, on_update: Callable[[str, dict], None] | None,
                 on_phase: Callable[[str, str | None], None] | None,
                 on_commit: Callable[[dict], None] | None):
        self.graph, self.ctx, self.root = graph, ctx, root
        self.callbacks = (on_update, on_phase, on_commit)
        self.lock = threading.Lock()
        self.abort = threading.Event()
        self.seeded = False
        self.reported: set[str] = set()
        from contextevolve.graph.builder import ITERATION_NODES

        # on_phase is given these nodes' child's id
        self.child_nodes = frozenset({*ITERATION_NODES, "update_buffer"})

    def config(self, worker: int) -> dict:
        """The LangGraph config of worker ``worker``'s thread."""
        from contextevolve.graph.builder import RECURSION_LIMIT

        return {"configurable": {"thread_id": worker_thread(worker)}, "recursion_limit": RECURSION_LIMIT}

    def drive(self, resume: bool) -> list[dict]:
        """Run every worker until it stops; returns their final states (``WorkerState`` fields as dicts).

        Raises:
            StaleCheckpointError: a thread waits at a node the graph no longer has (nothing is run).
            The first exception a worker raised (e.g. ``EndpointUnavailable``); the other workers stop
            after the node they are in, everything done checkpointed.
        """
        workers = self.ctx.parallelism.workers
        self.release_gone(workers)
        pending = {i: tuple(t.name for t in self.graph.get_state(self.config(i)).tasks) if resume else ()
                   for i in range(workers)}
        unknown = sorted({n for names in pending.values() for n in names} - set(self.graph.nodes))
        if unknown:
            raise StaleCheckpointError(f"{self.root} was checkpointed by another version of the graph "
                                       f"(pending nodes {', '.join(unknown)}); it cannot be resumed: start a "
                                       "new run directory")
        if workers == 1:
            finals = [self.one(0, bool(pending[0]))]
            self.final_reports()
            return finals
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="worker") as pool:
            futures = [pool.submit(self.one, i, bool(pending[i])) for i in range(workers)]
            try:
                errors = [f.exception() for f in futures]
            except BaseException:  # KeyboardInterrupt: the workers stop after the node they are in
                self.abort.set()
                steering_of(self.ctx).stop()  # (a paused or reviewing worker would never get there)
                raise
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            raise first
        self.final_reports()
        return [f.result() for f in futures]

    def release_gone(self, workers: int) -> None:
        """Give back the unfinished claims of workers this run no longer has (resumed with fewer).

        Their children that were handed over to the Summarizer behind them when the run stopped are finished.
        """
        from contextevolve.loop.behind import finish
        from contextevolve.nodes.summarize import write_abstract

        buffer = open_memory(self.ctx.run_dir, chroma_url=self.ctx.chroma_url).buffer
        for iteration in buffer.release_gone(workers):
            finish(self.ctx, program_id(iteration), write_abstract)

    def one(self, worker: int, has_pending: bool) -> dict:
        """Stream worker ``worker``'s thread to its end (or until another worker failed); its final state.

        A thread with pending tasks (killed mid-iteration) continues from its checkpoint; any other one gets
        new input, so a finished worker of an extended run claims again under this call's settings.
        """
        on_update, on_phase, on_commit = self.callbacks
        config = self.config(worker)
        payload = None if has_pending else {"worker": worker}
        try:
            for event in self.graph.stream(payload, config, context=self.ctx, stream_mode="tasks",
                                           durability="sync"):
                node = event.get("name", "")
                with self.lock:
                    if "result" not in event:  # a node starts
                        if on_phase is not None:
                            child = (_field(event.get("input"), "child_id", None)
                                     if node in self.child_nodes else None)
                            on_phase(node, child)
                    elif not event.get("error"):
                        written = _written(event.get("result"))
                        if on_update is not None:
                            on_update(node, written)
                        if on_commit is not None:
                            self.report(node, written, on_commit)
                if self.abort.is_set():
                    break
        except BaseException:
            self.abort.set()
            steering_of(self.ctx).stop()  # the other workers must not wait for a person
            raise
        return dict(self.graph.get_state(config).values)

    def report(self, node: str, written: dict, on_commit: Callable[[dict], None]) -> None:
        """Hand ``on_commit`` the report of c_0 once per call, then of every child committed since.

        A child is reported when it is committed (with the Summarizer behind its worker, after the worker
        went on).
        """
        buffer = open_memory(self.ctx.run_dir, chroma_url=self.ctx.chroma_url).buffer
        if node == "initialize" and not self.seeded:
            self.seeded = True
            self.reported = set(buffer.committed_ids())  # (a resumed run's children are not news)
            on_commit(commit_report(self.ctx, program_id(0)))
            return
        if not self.seeded or node not in ("update_buffer", "claim") or buffer.count() == len(self.reported):
            return
        for child in buffer.committed_ids():
            if child not in self.reported:
                self.reported.add(child)
                on_commit(commit_report(self.ctx, child))

    def final_reports(self) -> None:
        """Report the children committed after the workers' last events (the last Summarizer calls)."""
        if self.callbacks[2] is not None and self.seeded:
            with self.lock:
                self.report("claim", {}, self.callbacks[2])


def _worker_threads(path: Path) -> dict[int, str]:
    """Worker index -> LangGraph thread of the buffer at ``path``, read without writing.

    An older buffer is not migrated by looking at it; ``{}`` when there is none, or it is from before
    workers (format 1).
    """
    from contextevolve.memory.buffer import EvolveBuffer

    if not path.is_file():
        return {}
    try:
        buffer = EvolveBuffer(path, read_only=True)
    except sqlite3.Error:
        return {}
    try:
        return buffer.worker_threads()
    except sqlite3.Error:  # (format 1: no workers table)
        return {}
    finally:
        buffer.close()


def checkpointed_states(root: Path) -> dict[int, dict[str, Any]]:
    """The latest checkpointed state of each worker's thread of the run in ``root``.

    Worker index -> ``WorkerState`` fields as a dict plus ``next``, the nodes it waits to run (``()`` once
    its thread ended). Read-only; loads no models. The child a worker is making is ``child_id``; what
    became of the children it committed is in the Evolve Buffer (``last_child_id``).

    Raises:
        FileNotFoundError: ``root`` has no checkpoints.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    from contextevolve.graph.builder import build_graph
    from contextevolve.memory.store import BUFFER_FILE

    path = root / CHECKPOINT_FILE
    if not path.is_file():
        raise FileNotFoundError(path)
    threads = _worker_threads(root / BUFFER_FILE)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    try:
        graph = build_graph(SqliteSaver(conn))
        states = {}
        for worker, thread in sorted(threads.items()):
            snapshot = graph.get_state({"configurable": {"thread_id": thread}})
            states[worker] = {**snapshot.values, "next": tuple(snapshot.next)}
        return states
    finally:
        conn.close()


def worker_phases(root: Path) -> dict[int, dict[str, Any]]:
    """What each worker of the run in ``root`` is doing; ``{}`` without checkpoints.

    Per worker: ``next`` (the node it waits to run; empty once it stopped), ``child_id`` (the child in
    progress), ``committed`` (children it committed) and ``stop_reason``.
    """
    try:
        states = checkpointed_states(root)
    except FileNotFoundError:
        return {}
    return {w: {"next": list(s.get("next") or ()), "child_id": s.get("child_id") if s.get("next") else None,
                "committed": s.get("committed", 0), "stop_reason": s.get("stop_reason")}
            for w, s in states.items()}

"""Build the ContextEvolve state machine: initialize, then rounds of parallel lanes joined by the buffer update.

::

    START -> initialize -> dispatch ─Send×L─> select_parent -> navigate -> sample -> compose
                              ^                 -> generate -> evaluate ⇄ repair -> summarize
                              |                                                       |
                              └──────────────────── update_buffer <───────────────────┘
                                                (loop until a stop condition)

Every phase is a node of this one graph, so a run can be interrupted before or after any of
them by name (``interrupt_before=["generate"]``, in Python or from ``langgraph dev``) and its
updates stream with their content. A *lane* is one parent -> child pass through phases 1-7 on
its own :class:`~contextevolve.graph.state.LaneState`: each lane phase returns a ``Command`` that
hands the updated lane state to the next phase with a ``Send`` and copies it into
``EvolveState.lanes``. The last phase, summarize, hands the lane's report to ``update_buffer``,
which commits the round once all its lanes reported (an earlier call waits: it writes nothing).

With ``RunContext.parallelism.lanes = 1`` a round is one iteration of Algorithm 1, in the paper's order.
``repair`` (not in the paper) runs only for a child that failed, at most ``RunContext.search.repair_attempts``
times with the model (plus up to three added imports, which need none); with 0 the lane is exactly the paper's
phases 1-7.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command, Send, interrupt

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import EvolveState, LaneState, apply_update, lane_from
from contextevolve.memory.records import program_id
from contextevolve.nodes.compose import compose
from contextevolve.nodes.evaluate import evaluate
from contextevolve.nodes.generate import generate
from contextevolve.nodes.identity import check_identity
from contextevolve.nodes.initialize import initialize
from contextevolve.nodes.navigate import navigate
from contextevolve.nodes.repair import after_evaluate, after_repair, repair
from contextevolve.nodes.sample import sample
from contextevolve.nodes.select_parent import select_parent
from contextevolve.nodes.summarize import summarize
from contextevolve.nodes.update_buffer import update_buffer
from contextevolve.roles import total_tokens
from contextevolve.timing import phase_clock

LANE_PHASES = ("select_parent", "navigate", "sample", "compose", "generate", "evaluate", "summarize")
"""Phases 1-7 of Algorithm 1, run by each lane, in order."""
PHASES = (*LANE_PHASES, "update_buffer")
"""The eight phases of Algorithm 1, in order (phase 8 joins the lanes)."""
NODES = (*PHASES, "repair")
"""Every node a run passes through: the eight phases and ``repair`` (between evaluate and summarize)."""

_LANE_NODES: dict[str, tuple[Callable, tuple[str, ...], Callable[[LaneState], str] | None]] = {
    "select_parent": (select_parent, ("navigate",), None),
    "navigate": (navigate, ("sample",), None),
    "sample": (sample, ("compose",), None),
    "compose": (compose, ("generate",), None),
    "generate": (generate, ("evaluate",), None),
    "evaluate": (evaluate, ("repair", "summarize"), after_evaluate),
    "repair": (repair, ("evaluate", "repair", "summarize"), after_repair),
    "summarize": (summarize, ("update_buffer",), None),
}
"""Per lane node: its function, the nodes it may go to, and the router choosing among them (None: the only one)."""
LANE_NODES = tuple(_LANE_NODES)
"""The nodes a lane passes through: phases 1-7 and ``repair``."""


def dispatch(state: EvolveState) -> list[Send] | Literal["__end__"]:
    """Stop if a stop condition holds, else start the next round: ``state.round_size`` lanes, one ``Send`` each.

    Returns no ``Send`` while the buffer update waits for lanes of the round in progress. Lane ``i``
    produces iteration ``state.iteration + i + 1``.
    """
    if state.stop_reason:
        return END
    if state.lane_results:  # the round is not complete: its other lanes are still running
        return []
    lanes = max(1, state.round_size)
    # Plain dicts (a LaneState's fields): they are checkpointed as pending sends.
    return [Send(LANE_PHASES[0], {"iteration": state.iteration + i, "lane": i, "initial_id": state.initial_id,
                                  "run_identity": state.run_identity,
                                  "run_tokens": total_tokens(state.total_usage), "round_lanes": lanes})
            for i in range(lanes)]


def review(lane: LaneState) -> str:
    """The guidance ``lane``'s child will follow, as a person edited it: pauses the run with
    ``interrupt({"lane", "child_id", "parent_id", "guidance"})``; the value it is resumed with
    (``Command(resume=...)``) replaces the guidance when it is a non-empty string; any other value
    keeps the Navigator's guidance, with a warning. (Raising would not help: LangGraph hands the same
    resume value back on every retry, so the lane could never go on.)
    """
    edited = interrupt({"lane": lane.lane, "child_id": program_id(lane.iteration + 1),
                        "parent_id": lane.parent_id, "guidance": lane.guidance})
    if edited is not None and not isinstance(edited, str):
        warnings.warn(f"guidance review of {program_id(lane.iteration + 1)} resumed with a "
                      f"{type(edited).__name__}, not a string: the Navigator's guidance is kept", stacklevel=2)
        return lane.guidance
    return edited.strip() if edited and edited.strip() else lane.guidance


def lane_node(name: str) -> Callable[[LaneState | dict, Runtime[RunContext]], Command]:
    """The graph node running lane phase ``name`` (a key of ``_LANE_NODES``) on the lane state it was sent.

    It times the phase (:func:`contextevolve.timing.phase_clock`: its wall seconds and LLM calls are
    added to the lane's ``seconds`` and ``llm_calls``), applies the phase's update to the lane state,
    publishes the result in ``EvolveState.lanes``
    (with ``phase=name``) and sends it on to the next phase; the last phase also hands the lane's
    report (``lane_results``) to ``update_buffer``.
    """
    fn, destinations, route = _LANE_NODES[name]

    def run(state: LaneState | dict, runtime: Runtime[RunContext]) -> Command:
        lane = state if isinstance(state, LaneState) else lane_from(state)  # a Send delivers a plain dict
        check_identity(lane.run_identity, runtime.context)
        if name == "generate" and runtime.context.review_guidance:
            lane = replace(lane, guidance=review(lane))
        with phase_clock(name) as watch:
            update = fn(lane, runtime)
        lane = apply_update(lane, {**update, "seconds": watch.seconds,
                                   "llm_calls": [c.model_dump() for c in watch.calls]})
        if lane.lane_results:  # the report was written inside the phase: give it the lane's final seconds
            lane = replace(lane, lane_results=[{**r, "seconds": lane.seconds, "llm_calls": lane.llm_calls}
                                               for r in lane.lane_results])
        target = route(lane) if route else destinations[0]
        view = {**asdict(lane), "phase": name}
        del view["lane_results"]
        if target == "update_buffer":
            return Command(update={"lanes": [view], "lane_results": lane.lane_results}, goto=target)
        return Command(update={"lanes": [view]}, goto=Send(target, asdict(lane)))

    run.__name__ = run.__qualname__ = name
    run.__doc__ = fn.__doc__
    return run


def build_graph(checkpointer=None, *, store=None):
    """Compile the ContextEvolve graph.

    Args:
        checkpointer: a LangGraph checkpointer (e.g. ``SqliteSaver``) for durable, resumable runs;
            ``None`` for none (``langgraph dev`` supplies its own). Every phase is a superstep, so
            a run killed mid-round resumes at the phases its lanes had not finished.
        store: optional LangGraph store, passed through.

    Returns:
        A compiled graph; invoke with ``context=RunContext(...)`` and, when checkpointed, a
        ``thread_id`` in the config.
    """
    builder = StateGraph(EvolveState, context_schema=RunContext)
    builder.add_node("initialize", initialize)
    for name, (_, destinations, _) in _LANE_NODES.items():
        builder.add_node(name, lane_node(name), input_schema=LaneState, destinations=destinations)
    builder.add_node("update_buffer", update_buffer)
    builder.add_edge(START, "initialize")
    builder.add_conditional_edges("initialize", dispatch, [LANE_PHASES[0], END])
    builder.add_conditional_edges("update_buffer", dispatch, [LANE_PHASES[0], END])
    return builder.compile(checkpointer=checkpointer, store=store, name="ContextEvolve")


graph = build_graph()
"""Module-level compiled graph (no checkpointer) for ``langgraph.json`` / ``langgraph dev``."""

"""Build the ContextEvolve state machine: initialize, then rounds of parallel lanes joined by the buffer update.

::

    START -> initialize -> dispatch ─Send×L─> lane [select_parent -> navigate -> sample -> compose
                              ^                     -> generate -> evaluate ⇄ repair
                              |                     -> summarize]
                              └──── update_buffer <────┘            (loop until a stop condition)

With ``RunContext.lanes = 1`` a round is one iteration of Algorithm 1, in the paper's order.
``repair`` (issue 10) runs only for a child that failed, at most ``RunContext.repair_attempts``
times; with 0 the lane is exactly the paper's phases 1-7.
"""

from __future__ import annotations

from typing import Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import EvolveState, LaneOutput, LaneState
from contextevolve.nodes.compose import compose
from contextevolve.nodes.evaluate import evaluate
from contextevolve.nodes.generate import generate
from contextevolve.nodes.initialize import initialize
from contextevolve.nodes.navigate import navigate
from contextevolve.nodes.repair import after_evaluate, after_repair, repair
from contextevolve.nodes.sample import sample
from contextevolve.nodes.select_parent import select_parent
from contextevolve.nodes.summarize import summarize
from contextevolve.nodes.update_buffer import update_buffer

LANE_PHASES = ("select_parent", "navigate", "sample", "compose", "generate", "evaluate", "summarize")
"""Phases 1-7 of Algorithm 1, run inside each lane, in order."""
PHASES = (*LANE_PHASES, "update_buffer")
"""The eight phases of Algorithm 1, in order (phase 8 joins the lanes)."""
NODES = (*PHASES, "repair")
"""Every node a run passes through: the eight phases and ``repair`` (between evaluate and summarize)."""


def dispatch(state: EvolveState, runtime: Runtime[RunContext]) -> list[Send] | Literal["__end__"]:
    """Stop if a stop condition holds, else start the next round: one ``Send`` per lane.

    A round never overshoots the iteration budget: lanes = min(``ctx.lanes``, iterations left).
    Lane ``i`` produces iteration ``state.iteration + i + 1``.
    """
    if state.stop_reason:
        return END
    lanes = max(1, min(runtime.context.lanes, runtime.context.max_iterations - state.iteration))
    # Plain dicts (the lane's LaneState input): they are checkpointed as pending sends.
    return [Send("lane", {"iteration": state.iteration + i, "lane": i, "initial_id": state.initial_id})
            for i in range(lanes)]


def build_lane():
    """Compile the lane subgraph (phases 1-7 and repair on a :class:`LaneState`; outputs a :class:`LaneOutput`)."""
    lane = StateGraph(LaneState, context_schema=RunContext, output_schema=LaneOutput)
    for name, fn in zip(LANE_PHASES, (select_parent, navigate, sample, compose, generate, evaluate, summarize)):
        lane.add_node(name, fn)
    lane.add_node("repair", repair)
    lane.add_edge(START, LANE_PHASES[0])
    for a, b in zip(LANE_PHASES, LANE_PHASES[1:]):
        if a != "evaluate":
            lane.add_edge(a, b)
    lane.add_conditional_edges("evaluate", after_evaluate, ["repair", "summarize"])
    lane.add_conditional_edges("repair", after_repair, ["evaluate", "repair", "summarize"])
    lane.add_edge(LANE_PHASES[-1], END)
    return lane.compile(name="lane")


def build_graph(checkpointer=None, *, store=None):
    """Compile the ContextEvolve graph.

    Args:
        checkpointer: a LangGraph checkpointer (e.g. ``SqliteSaver``) for durable, resumable runs;
            ``None`` for none (``langgraph dev`` supplies its own). Lanes inherit it, so a run
            killed mid-round resumes its unfinished lanes only.
        store: optional LangGraph store, passed through.

    Returns:
        A compiled graph; invoke with ``context=RunContext(...)`` and, when checkpointed, a
        ``thread_id`` in the config.
    """
    builder = StateGraph(EvolveState, context_schema=RunContext)
    builder.add_node("initialize", initialize)
    builder.add_node("lane", build_lane())
    builder.add_node("update_buffer", update_buffer)
    builder.add_edge(START, "initialize")
    builder.add_conditional_edges("initialize", dispatch, ["lane", END])
    builder.add_edge("lane", "update_buffer")
    builder.add_conditional_edges("update_buffer", dispatch, ["lane", END])
    return builder.compile(checkpointer=checkpointer, store=store, name="ContextEvolve")


graph = build_graph()
"""Module-level compiled graph (no checkpointer) for ``langgraph.json`` / ``langgraph dev``."""

"""Build the ContextEvolve state machine: initialize, then eight phases in a loop until a stop condition."""

from __future__ import annotations

from typing import Literal

from langgraph.graph import END, START, StateGraph

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import EvolveState
from contextevolve.nodes.compose import compose
from contextevolve.nodes.evaluate import evaluate
from contextevolve.nodes.generate import generate
from contextevolve.nodes.initialize import initialize
from contextevolve.nodes.navigate import navigate
from contextevolve.nodes.sample import sample
from contextevolve.nodes.select_parent import select_parent
from contextevolve.nodes.summarize import summarize
from contextevolve.nodes.update_buffer import update_buffer

PHASES = ("select_parent", "navigate", "sample", "compose", "generate", "evaluate", "summarize", "update_buffer")
"""The eight phases of Algorithm 1, in order."""


def should_continue(state: EvolveState) -> Literal["select_parent", "__end__"]:
    """Loop back to phase 1 unless a stop condition (set by the last node) holds."""
    return END if state.stop_reason else "select_parent"


def build_graph(checkpointer=None, *, store=None):
    """Compile the ContextEvolve graph.

    Args:
        checkpointer: a LangGraph checkpointer (e.g. ``SqliteSaver``) for durable, resumable runs;
            ``None`` for none (``langgraph dev`` supplies its own).
        store: optional LangGraph store, passed through.

    Returns:
        A compiled graph; invoke with ``context=RunContext(...)`` and, when checkpointed, a
        ``thread_id`` in the config.
    """
    builder = StateGraph(EvolveState, context_schema=RunContext)
    builder.add_node("initialize", initialize)
    for name, fn in zip(PHASES, (select_parent, navigate, sample, compose, generate, evaluate, summarize,
                                 update_buffer)):
        builder.add_node(name, fn)
    builder.add_edge(START, "initialize")
    builder.add_conditional_edges("initialize", should_continue)
    for a, b in zip(PHASES, PHASES[1:]):
        builder.add_edge(a, b)
    builder.add_conditional_edges("update_buffer", should_continue)
    return builder.compile(checkpointer=checkpointer, store=store, name="ContextEvolve")


graph = build_graph()
"""Module-level compiled graph (no checkpointer) for ``langgraph.json`` / ``langgraph dev``."""

"""Build the ContextEvolve state machine that each worker of a run runs, as one LangGraph thread.

::

    START -> initialize -> claim ─(a child claimed)─> select_parent -> navigate -> sample -> compose
                             ^   └─(a stop rule holds)─> END      -> review -> generate -> evaluate ⇄ repair
                             |                                                              -> summarize
                             └──────────────────────── update_buffer <──────────────────────────┘

With ``search.samples_per_prompt`` n above 1, ``generate`` asks one composed prompt for n replies and stores
each as a child of its own under an id ``claim`` took for it; the worker's next n - 1 claims take those
children straight to ``evaluate`` (the dotted path ``claim -> evaluate``), so the Navigator, the Sampler and
the prompt are paid for once per n children.

One pass from ``claim`` to ``update_buffer`` is one iteration of Algorithm 1 (phases 1-8, plus ``claim``,
``review`` and ``repair``, which runs only for a child with a missing import or a behavioural twin; with
``import_fixes`` and ``behavioural_twins`` off the iteration is exactly the paper's). A run is
``RunContext.parallelism.workers`` threads of this graph over one Evolve Buffer
(:func:`contextevolve.api.evolve` starts them), with no barrier between them. Every phase is a node of its
own, so ``interrupt_before=["generate"]`` (any phase, or ``"*"``) pauses a worker there by name. Why not a
subgraph: docs/decisions/workers.md; the graph: docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.loop.identity import check_identity
from contextevolve.nodes.claim import after_claim, claim
from contextevolve.nodes.compose import compose
from contextevolve.nodes.evaluate import evaluate
from contextevolve.nodes.generate import generate
from contextevolve.nodes.initialize import initialize
from contextevolve.nodes.navigate import navigate
from contextevolve.nodes.repair import after_evaluate, after_repair, repair, repair_phase
from contextevolve.nodes.review import review
from contextevolve.nodes.sample import sample
from contextevolve.nodes.select_parent import select_parent
from contextevolve.nodes.summarize import summarize
from contextevolve.nodes.update_buffer import update_buffer
from contextevolve.timing import phase_clock

ITERATION_PHASES = ("select_parent", "navigate", "sample", "compose", "generate", "evaluate", "summarize")
"""Phases 1-7 of Algorithm 1, in order: the phases that make one child."""
PHASES = (*ITERATION_PHASES, "update_buffer")
"""The eight phases of Algorithm 1, in order."""
ITERATION_NODES = ("select_parent", "navigate", "sample", "compose", "review", "generate", "evaluate",
                   "repair", "summarize")
"""Every node one child passes through, from parent selection to its abstract."""
NODES = ("initialize", "claim", *ITERATION_NODES, "update_buffer")
"""Every node of the graph."""
RECURSION_LIMIT = 2**31 - 1
"""LangGraph's step limit for a worker's thread: none in effect. A worker ends because its claims end (the
iteration budget bounds them) and a child's repairs are bounded, so a limit would only stop long runs
(LangGraph's default, 25 steps, is two iterations)."""


def timed(name: str, fn: Callable[[WorkerState, Runtime[RunContext]], dict],
          phase: Callable[[WorkerState, Runtime[RunContext]], str] | None = None) -> Callable:
    """Node ``name`` running phase function ``fn``, checked and timed.

    It checks the thread's run (:func:`~contextevolve.loop.identity.check_identity`), times the phase
    (:func:`contextevolve.timing.phase_clock`) and adds its wall seconds and LLM calls to the
    iteration's ``seconds`` and ``llm_calls`` (their reducers sum them). The phase is ``name``, or what
    ``phase`` says for this step (a node that does one of two things books each under its own name).
    """

    def run(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
        check_identity(state.run_identity, runtime.context)
        with phase_clock(phase(state, runtime) if phase is not None else name) as watch:
            update = fn(state, runtime)
        return {**update, "seconds": watch.seconds, "llm_calls": [c.model_dump() for c in watch.calls]}

    run.__name__ = run.__qualname__ = name
    run.__doc__ = fn.__doc__
    return run


def checked(fn: Callable[[WorkerState, Runtime[RunContext]], dict]) -> Callable:
    """Node ``fn`` after the thread's run check, untimed (``review``: a person's pause is no phase)."""

    def run(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
        check_identity(state.run_identity, runtime.context)
        return fn(state, runtime)

    run.__name__ = run.__qualname__ = fn.__name__
    run.__doc__ = fn.__doc__
    return run


def build_graph(checkpointer=None, *, store=None):
    """Compile the graph one worker runs.

    Args:
        checkpointer: a LangGraph checkpointer (e.g. ``SqliteSaver``) for durable, resumable runs;
            ``None`` for none (``langgraph dev`` supplies its own). Every node is a superstep, so a
            worker killed mid-iteration resumes at the node it had not finished.
        store: optional LangGraph store, passed through.

    Returns:
        A compiled graph; invoke with ``context=RunContext(...)`` and, when checkpointed, a ``thread_id``
        in the config (one thread per worker; the input may name the worker, ``{"worker": i}``).
    """
    builder = StateGraph(WorkerState, context_schema=RunContext)
    builder.add_node("initialize", initialize)
    builder.add_node("claim", claim)
    for name, fn in (("select_parent", select_parent), ("navigate", navigate), ("sample", sample),
                     ("compose", compose), ("generate", generate), ("evaluate", evaluate),
                     ("summarize", summarize)):
        builder.add_node(name, timed(name, fn))
    builder.add_node("repair", timed("repair", repair, phase=repair_phase))
    builder.add_node("review", checked(review))
    builder.add_node("update_buffer", update_buffer)
    builder.add_edge(START, "initialize")
    builder.add_edge("initialize", "claim")
    builder.add_conditional_edges("claim", after_claim, ["select_parent", "evaluate", END])
    for a, b in (("select_parent", "navigate"), ("navigate", "sample"), ("sample", "compose"),
                 ("compose", "review"), ("review", "generate"), ("generate", "evaluate"),
                 ("summarize", "update_buffer"), ("update_buffer", "claim")):
        builder.add_edge(a, b)
    builder.add_conditional_edges("evaluate", after_evaluate, ["repair", "summarize"])
    builder.add_conditional_edges("repair", after_repair, ["evaluate", "repair", "summarize"])
    return builder.compile(checkpointer=checkpointer, store=store, name="ContextEvolve")


graph = build_graph().with_config(recursion_limit=RECURSION_LIMIT)
"""Module-level compiled graph (no checkpointer) for ``langgraph.json`` / ``langgraph dev``."""

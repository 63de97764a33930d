"""Shared fixtures: run settings in a temporary run directory, scripted chat models, node runner."""

from __future__ import annotations

import os

import pytest
from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import EvolveState, LaneState
from contextevolve.llm.models import use_chat_models
from contextevolve.memory.store import close_memory, open_memory
from tests.fakes import default_models

# Unit tests must never reach a real endpoint configured in the developer's shell.
for _name in list(os.environ):
    if _name.startswith("CONTEXTEVOLVE_") or _name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        del os.environ[_name]


@pytest.fixture
def ctx(tmp_path) -> RunContext:
    """Run settings pointing at a fresh run directory."""
    yield RunContext(run_dir=str(tmp_path / "run"), max_iterations=3, max_retries=0)
    close_memory(tmp_path / "run")


@pytest.fixture
def models():
    """Scripted fake chat models installed for every role; the dict lets tests inspect prompts."""
    scripted = default_models()
    with use_chat_models(**scripted):
        yield scripted


def run_node(fn, state, ctx: RunContext) -> dict:
    """Call a node function the way LangGraph does and return its update."""
    return fn(state, Runtime(context=ctx))


def apply(state, update: dict):
    """Apply a node update to a run or lane state as LangGraph does (keys with a reducer merged)."""
    from contextevolve.graph.state import apply_update

    return apply_update(state, update)


@pytest.fixture
def seeded_run(ctx, models):
    """A run directory whose buffer holds the evaluated, abstracted initial program; returns (run state, memory)."""
    from contextevolve.nodes.initialize import initialize

    state = apply(EvolveState(), run_node(initialize, EvolveState(), ctx))
    return state, open_memory(ctx.run_dir)


@pytest.fixture
def seeded(seeded_run):
    """Like ``seeded_run``, but returns the state of the first lane: (lane state, memory)."""
    state, memory = seeded_run
    return LaneState(iteration=state.iteration, initial_id=state.initial_id), memory

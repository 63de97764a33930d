"""Shared fixtures: run settings in a temporary run directory, scripted chat models, node runner."""

from __future__ import annotations

import os

import pytest
from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
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


def composed(state, ctx: RunContext):
    """``state`` with the Generator's prompt that compose builds for it (generate sends ``state.prompt``)."""
    from contextevolve.nodes.compose import compose

    return apply(state, run_node(compose, state, ctx))


def apply(state, update: dict):
    """``state`` (a :class:`WorkerState`) with a node's ``update`` applied as LangGraph applies it.

    Keys whose field is ``Annotated`` with a reducer are merged, the others replaced, ``Overwrite``
    replacing.
    """
    import dataclasses
    import typing

    from langgraph.types import Overwrite

    hints = typing.get_type_hints(type(state), include_extras=True)
    merged = {}
    for key, value in update.items():
        reducer = next((m for m in getattr(hints[key], "__metadata__", ()) if callable(m)), None)
        if isinstance(value, Overwrite):
            merged[key] = value.value
        else:
            merged[key] = reducer(getattr(state, key), value) if reducer else value
    return dataclasses.replace(state, **merged)


@pytest.fixture
def seeded_run(ctx, models):
    """A run directory whose buffer holds the evaluated, abstracted initial program.

    Returns (worker state after initialize, memory).
    """
    from contextevolve.nodes.initialize import initialize

    state = apply(WorkerState(), run_node(initialize, WorkerState(), ctx))
    return state, open_memory(ctx.run_dir)


@pytest.fixture
def seeded(seeded_run, ctx):
    """Like ``seeded_run``, but with the first child claimed: (worker state, memory)."""
    from contextevolve.nodes.claim import claim

    state, memory = seeded_run
    return apply(state, run_node(claim, state, ctx)), memory

"""Review: a person may rewrite the guidance the child will follow.

Between compose and generate, before any LLM call of ``generate``. Two ways: with
``RunContext.review_guidance`` every iteration pauses with LangGraph's ``interrupt()`` (resuming repeats no
request); otherwise a person who asked through the run's steering (the live view of ``run --serve``,
:mod:`contextevolve.loop.steering`) gets the next child's guidance to rewrite while its worker waits. A
replaced guidance is recorded on the child beside the Navigator's (``navigator_guidance``).
"""

from __future__ import annotations

import warnings

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.loop.steering import steering_of


def _replaced(state: WorkerState, edited: str | None) -> dict:
    """The update for a person's ``edited`` guidance: theirs, the Navigator's kept beside it."""
    if not edited or not edited.strip() or edited.strip() == state.guidance.strip():
        return {}
    return {"guidance": edited.strip(), "navigator_guidance": state.guidance}


def review(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
    """Let a person replace the guidance: ``interrupt`` when the run reviews, else the steering's request.

    With ``review_guidance`` it pauses with ``interrupt({"worker", "child_id", "parent_id", "guidance"})``;
    the value it is resumed with (``Command(resume=...)``) replaces the guidance when it is a non-empty
    string; any other value keeps the Navigator's, with a warning for one that is not a string. (Raising
    would not help: LangGraph hands the same resume value back on every retry, so the worker could never
    go on.)
    """
    if not runtime.context.review_guidance:
        return _replaced(state, steering_of(runtime.context).review(state.worker, state.child_id,
                                                                     state.parent_id, state.guidance))
    edited = interrupt({"worker": state.worker, "child_id": state.child_id, "parent_id": state.parent_id,
                        "guidance": state.guidance})
    if edited is not None and not isinstance(edited, str):
        warnings.warn(f"guidance review of {state.child_id} resumed with a {type(edited).__name__}, not a "
                      "string: the Navigator's guidance is kept", stacklevel=2)
        return {}
    return _replaced(state, edited)

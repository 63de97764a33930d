"""Review: a person may rewrite the guidance the child will follow (``RunContext.review_guidance``).

Between compose and generate. With the review off it passes at once; on, it pauses the worker with
LangGraph's ``interrupt()`` before any LLM call of ``generate``, so resuming repeats no request.
"""

from __future__ import annotations

import warnings

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState


def review(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
    """Pause with ``interrupt({"worker", "child_id", "parent_id", "guidance"})`` when the run reviews.

    The value it is resumed with (``Command(resume=...)``) replaces the guidance when it is a non-empty
    string; any other value keeps the Navigator's, with a warning for one that is not a string.
    (Raising would not help: LangGraph hands the same resume value back on every retry, so the worker
    could never go on.)
    """
    if not runtime.context.review_guidance:
        return {}
    edited = interrupt({"worker": state.worker, "child_id": state.child_id, "parent_id": state.parent_id,
                        "guidance": state.guidance})
    if edited is not None and not isinstance(edited, str):
        warnings.warn(f"guidance review of {state.child_id} resumed with a {type(edited).__name__}, not a "
                      "string: the Navigator's guidance is kept", stacklevel=2)
        return {}
    return {"guidance": edited.strip()} if edited and edited.strip() else {}

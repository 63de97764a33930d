"""The ContextEvolve LangGraph: state and run settings (the schemas every layer uses) and the builder.

``contextevolve.graph.state`` and ``.context`` sit at the bottom of the package's layers; the
builder (``contextevolve.graph.builder``) at the top, above the nodes. ``build_graph`` and
``PHASES`` are re-exported lazily, so importing a schema never imports the builder and its nodes.
"""

from typing import Any

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState

__all__ = ["PHASES", "RunContext", "WorkerState", "build_graph"]


def __getattr__(name: str) -> Any:
    if name in ("build_graph", "PHASES"):
        from contextevolve.graph import builder

        return getattr(builder, name)
    raise AttributeError(f"module 'contextevolve.graph' has no attribute {name!r}")

"""The ContextEvolve LangGraph: state, run settings and the builder."""

from contextevolve.graph.builder import PHASES, build_graph
from contextevolve.graph.context import RunContext
from contextevolve.graph.state import EvolveState

__all__ = ["PHASES", "EvolveState", "RunContext", "build_graph"]

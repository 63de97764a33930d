"""ContextEvolve: evolve systems code with an LLM and three context-compression agents.

The package import is deliberately light (no LangGraph, Chroma or torch) because the
candidate-program harness imports ``contextevolve.tasks.*.harness`` inside a fresh child
process. Import :func:`contextevolve.api.evolve` or :func:`contextevolve.graph.build_graph`
explicitly.
"""

__version__ = "0.1.0"

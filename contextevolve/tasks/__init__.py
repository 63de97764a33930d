"""Tasks: the problems ContextEvolve evolves programs for (one sub-package each).

Kept import-free on purpose: each candidate's child process imports a task's
``harness`` module, and that must not drag in pydantic, LangGraph or torch.
Use :mod:`contextevolve.tasks.base` and :mod:`contextevolve.tasks.registry`.
"""

"""Task registry: name -> :class:`~contextevolve.tasks.base.Task` instance."""

from __future__ import annotations

from functools import cache
from importlib import import_module

from contextevolve.tasks.base import Task

_TASKS: dict[str, str] = {
    "model_placement": "contextevolve.tasks.model_placement.task:ModelPlacement",
    "txn_scheduling": "contextevolve.tasks.txn_scheduling.task:TxnScheduling",
    "llm_sql": "contextevolve.tasks.llm_sql.task:LlmSql",
    "eplb": "contextevolve.tasks.eplb.task:Eplb",
    "sparse_attention": "contextevolve.tasks.sparse_attention.task:SparseAttention",
}


def register_task(name: str, target: str) -> None:
    """Register a task class by import path ``"package.module:ClassName"`` under ``name``."""
    _TASKS[name] = target
    _registered.cache_clear()


def task_names() -> list[str]:
    """Names of all registered tasks, sorted."""
    return sorted(_TASKS)


def get_task(name: str) -> Task:
    """Return the (cached) task instance called ``name``.

    ``problem:<folder>`` names a user's problem staged in ``folder``
    (:mod:`contextevolve.tasks.problem`).

    Raises:
        KeyError: no such task; the message lists the known ones.
        contextevolve.tasks.problem.source.ProblemError: ``folder`` holds no staged problem.
    """
    if name.startswith("problem:"):  # a user's staged problem folder (contextevolve.tasks.problem.source)
        from contextevolve.tasks.problem.task import problem_task

        return problem_task(name.removeprefix("problem:"))
    return _registered(name)


@cache
def _registered(name: str) -> Task:
    try:
        target = _TASKS[name]
    except KeyError:
        raise KeyError(f"unknown task {name!r}; known tasks: {', '.join(task_names())}") from None
    module_name, _, class_name = target.partition(":")
    return getattr(import_module(module_name), class_name)()

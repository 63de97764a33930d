"""A thread belongs to one run: the identity a thread keeps, and the check every phase makes."""

from __future__ import annotations

from pathlib import Path

from contextevolve.graph.context import RunContext
from contextevolve.loop.resources import memory_of
from contextevolve.memory.buffer import stored_run_id
from contextevolve.memory.store import BUFFER_FILE


class ThreadMismatchError(ValueError):
    """A thread is driven with run settings that name another run, or a run directory by a second thread.

    Both used to fail late, or silently finish at once.
    """


def run_identity(ctx: RunContext) -> dict[str, str]:
    """What ties a thread to its run: ``{"task", "run_id", "run_dir"}``.

    The task, the run's id (drawn once and kept in its buffer, so it survives moving the directory) and,
    for messages, the run directory as given.
    """
    return {"task": ctx.task, "run_id": memory_of(ctx).buffer.run_id(), "run_dir": str(ctx.run_dir)}


def check_identity(identity: dict[str, str] | None, ctx: RunContext) -> None:
    """Refuse run settings that name another run than the thread's ``identity`` (empty: not set yet).

    Reads the named run's id read-only (:func:`stored_run_id`): a directory that is not the thread's
    run is neither created nor changed.

    Raises:
        ThreadMismatchError: e.g. a thread resumed without its settings, whose defaults name
            ``runs/default``; the message names both runs and where the right settings are.
    """
    if not identity:
        return
    # a user's problem is named by its copy's path, which moves with the run
    tasks = (ctx.task, identity["task"])
    same_task = tasks[0] == tasks[1] or all(t.startswith("problem:") for t in tasks)
    same = same_task and stored_run_id(Path(ctx.run_dir) / BUFFER_FILE) == identity["run_id"]
    if not same:
        raise ThreadMismatchError(
            f"this thread drives the {identity['task']} run in {identity['run_dir']}, but the run settings "
            f"name the {ctx.task} run in {ctx.run_dir}: resume the thread with its own settings (the "
            f"context it was started with; evolve() keeps them in the run directory's run.json)")

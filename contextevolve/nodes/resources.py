"""What every node needs from its run settings: the task, the run's memory, a seeded RNG."""

from __future__ import annotations

import random
from pathlib import Path

from contextevolve.graph.context import RunContext
from contextevolve.memory.store import BUFFER_FILE, RunMemory, open_memory
from contextevolve.tasks.base import Task
from contextevolve.tasks.registry import get_task


class ThreadMismatchError(ValueError):
    """A thread is driven with run settings that name another run, or a run directory is opened by
    a second thread (issue 12: both used to fail late, or silently finish at once)."""


def run_identity(ctx: RunContext) -> dict[str, str]:
    """What ties a thread to its run: the task, the run's id (drawn once and kept in its buffer, so
    it survives moving the directory) and, for messages, the run directory as given."""
    return {"task": ctx.task, "run_id": memory_of(ctx).buffer.run_id(), "run_dir": str(ctx.run_dir)}


def check_identity(identity: dict[str, str] | None, ctx: RunContext) -> None:
    """Refuse run settings that name another run than the thread's ``identity`` (empty: not set yet).
    Opens nothing that does not exist: a run directory without a buffer is refused as it is.

    Raises:
        ThreadMismatchError: e.g. a thread resumed without its settings, whose defaults name
            ``runs/default``; the message names both runs and where the right settings are.
    """
    if not identity:
        return
    same = (ctx.task == identity["task"] and (Path(ctx.run_dir) / BUFFER_FILE).is_file()
            and memory_of(ctx).buffer.run_id() == identity["run_id"])
    if not same:
        raise ThreadMismatchError(
            f"this thread drives the {identity['task']} run in {identity['run_dir']}, but the run settings name "
            f"the {ctx.task} run in {ctx.run_dir}: resume the thread with its own settings (the context it was "
            f"started with; evolve() keeps them in the run directory's run.json)")


def task_of(ctx: RunContext) -> Task:
    """The task named by ``ctx.task``."""
    return get_task(ctx.task)


def memory_of(ctx: RunContext) -> RunMemory:
    """The Evolve Buffer and abstract index of ``ctx.run_dir``."""
    return open_memory(ctx.run_dir, chroma_url=ctx.chroma_url)


def rng_for(ctx: RunContext, iteration: int, phase: str) -> random.Random:
    """RNG seeded by (seed, iteration, phase): replaying an iteration after a crash draws the same."""
    return random.Random(f"{ctx.seed}:{iteration}:{phase}")


def round_size(ctx: RunContext, iteration: int) -> int:
    """Lanes of the next round: ``ctx.lanes``, cut to the iterations left (at least 1), so a round
    never overshoots the iteration budget."""
    return max(1, min(ctx.lanes, ctx.max_iterations - iteration))


def stop_reason(ctx: RunContext, task: Task, iteration: int, best_score: float | None,
                tokens_used: int) -> str | None:
    """Why the loop should stop now, or None. Checks iteration budget, target score, token budget."""
    if iteration >= ctx.max_iterations:
        return f"iteration budget reached ({iteration}/{ctx.max_iterations})"
    if ctx.target_score is not None and best_score is not None and (
            best_score == ctx.target_score or task.better(best_score, ctx.target_score)):
        return f"target score reached ({best_score:.6g})"
    if ctx.token_budget is not None and tokens_used >= ctx.token_budget:
        return f"token budget reached ({tokens_used}/{ctx.token_budget})"
    return None

"""What every node needs from its run settings: the task, the run's memory, a seeded RNG."""

from __future__ import annotations

import random

from contextevolve.graph.context import RunContext
from contextevolve.memory.store import RunMemory, open_memory
from contextevolve.tasks.base import Task
from contextevolve.tasks.registry import get_task


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

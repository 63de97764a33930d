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

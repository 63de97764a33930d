"""Phase 1, SelectParent: pick (c_p, z_p, s_p) from the Evolve Buffer."""

from __future__ import annotations

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import LaneState
from contextevolve.memory.records import program_id
from contextevolve.nodes.resources import memory_of, rng_for, task_of


def select_parent(state: LaneState, runtime: Runtime[RunContext]) -> dict:
    """Choose the parent among committed ``ok`` programs.

    Strategies (``RunContext.search.parent_selection``): ``best``; ``random`` (uniform); ``tournament``
    (best of ``tournament_size`` drawn uniformly — keeps pressure towards good programs while
    letting others be explored). Falls back to the initial program if nothing is ok. The RNG
    is seeded by the lane's iteration, so parallel lanes draw independently and replays draw the same.
    """
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    pool = [r for r in memory.buffer.committed() if r.status == "ok"]
    rng = rng_for(ctx, state.iteration, "parent")
    if not pool:
        parent = memory.buffer.require(state.initial_id or program_id(0))
    elif ctx.search.parent_selection == "best":
        parent = memory.buffer.best(task.higher_is_better)
    elif ctx.search.parent_selection == "random":
        parent = rng.choice(pool)
    else:
        entrants = rng.sample(pool, min(ctx.search.tournament_size, len(pool)))
        parent = max(entrants, key=lambda r: r.combined_score if task.higher_is_better else -r.combined_score)
    return {"parent_id": parent.id}

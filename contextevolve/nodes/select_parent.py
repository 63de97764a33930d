"""Phase 1, SelectParent: pick (c_p, z_p, s_p) from the Evolve Buffer."""

from __future__ import annotations

import math

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.loop.resources import memory_of, rng_for, task_of
from contextevolve.memory.records import ProgramRecord, program_id
from contextevolve.tasks.base import MetricSpec

TOURNAMENT_SIZE = 3
"""Entrants of a tournament, drawn uniformly from the ok programs (``parent_selection="tournament"``, and
``"pareto"`` while one program leads every metric)."""


def stale_parents(records: list[ProgramRecord], after: int, *, now: int | None = None,
                  rest: int | None = None) -> set[str]:
    """Ids of the programs whose last ``after`` children were all twins, while they rest.

    The children are taken in ``records``' order, the buffer's iteration order; a twin means the model
    wrote the program, or another buffered one, back each time (a code twin), or wrote one that behaved as
    a stored one (a behavioural twin). A stale program rests for ``rest`` iterations after its last child:
    it is in the set while ``now - last child's iteration <= rest``, then out of it until its next child,
    which, if a twin again, makes it stale at once (so a parent the model only copies gets one child in
    ``rest + 1`` iterations). ``now`` is the iteration of the child a parent is chosen for; ``now`` or
    ``rest`` None: stale for good, as with a rest longer than the run.

    ``after`` <= 0 gives the empty set. A program with fewer than ``after`` children is never stale.
    """
    if after <= 0:
        return set()
    kinds: dict[str, list[bool]] = {}
    last: dict[str, int] = {}
    for record in records:
        if record.parent_id is not None:
            kinds.setdefault(record.parent_id, []).append(
                record.failure_kind == "twin" or bool(record.behavioural_twin_of))
            last[record.parent_id] = record.iteration
    return {parent for parent, twins in kinds.items()
            if len(twins) >= after and all(twins[-after:])
            and (now is None or rest is None or now - last[parent] <= rest)}


def pareto_front(records: list[ProgramRecord], metrics: list[MetricSpec]) -> dict[str, int]:
    """The programs best on some metric and dominated by none, each with the number of metrics it is best on.

    Per metric of ``metrics`` (each in its own direction), the programs of ``records`` with the best value
    are found; of their union, a program that another one matches or beats on every metric and beats on one
    is dropped (dominated). The count is how many metrics' best values a program holds, the weight
    GEPA's candidate selection draws by (Agrawal et al. 2025, "GEPA: Reflective Prompt Evolution Can
    Outperform Reinforcement Learning", Algorithm 2, there over per-instance scores). A program that lacks
    a metric (an evaluator of one's own may return other names on other runs) is worse on it than any
    program that has it. Returns ids in ``records``' order; empty without records or metrics.
    """
    if not records or not metrics:
        return {}
    vectors = {r.id: [-math.inf if (v := r.metrics.get(s.name)) is None else s.oriented(v) for s in metrics]
               for r in records}
    best = [max(column) for column in zip(*vectors.values())]
    wins = {pid: sum(v == b for v, b in zip(vector, best)) for pid, vector in vectors.items()}
    leaders = {pid: vectors[pid] for pid, count in wins.items() if count}

    def dominated(mine: list[float]) -> bool:
        return any(theirs != mine and all(t >= m for t, m in zip(theirs, mine))
                   for theirs in leaders.values())

    return {pid: wins[pid] for pid, vector in leaders.items() if not dominated(vector)}


def select_parent(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
    """Choose the parent among committed ``ok`` programs that are not behavioural twins.

    Strategies (``RunContext.search.parent_selection``): ``best`` (earliest on ties); ``random``
    (uniform); ``tournament`` (best of :data:`TOURNAMENT_SIZE` drawn uniformly: pressure towards good
    programs, room for others); ``pareto``: drawn from :func:`pareto_front` over the task's metrics,
    weighted by the metrics each program is best on, so that a child that traded one metric for another
    stays a parent (a tournament while the front holds one program: no trade-off to exploit). A stale
    parent (:func:`stale_parents`, after ``search.stale_after`` twins in a row) is left out for
    ``search.stale_rest`` iterations while another ok program is left (why:
    docs/decisions/search-settings.md). Falls back to the initial program if nothing is ok. The RNG is
    seeded by the child's iteration, so parallel workers draw independently and replays draw the same.
    """
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    committed = memory.buffer.committed()
    pool = [r for r in committed if r.useful]
    child = state.iteration + 1
    stale = stale_parents(committed, ctx.search.stale_after, now=child, rest=ctx.search.stale_rest)
    pool = [r for r in pool if r.id not in stale] or pool
    rng = rng_for(ctx, state.iteration, "parent")
    sign = 1 if task.higher_is_better else -1

    def fitness(record):
        return sign * record.combined_score

    if not pool:
        parent = memory.buffer.require(state.initial_id or program_id(0))
    elif ctx.search.parent_selection == "best":
        parent = max(pool, key=fitness)  # the first maximum: the earliest
    elif ctx.search.parent_selection == "random":
        parent = rng.choice(pool)
    elif ctx.search.parent_selection == "pareto" and len(front := pareto_front(pool, task.metrics)) > 1:
        picked = rng.choices(list(front), weights=list(front.values()))[0]  # weighted by metrics led
        parent = next(r for r in pool if r.id == picked)
    else:
        entrants = rng.sample(pool, min(TOURNAMENT_SIZE, len(pool)))
        parent = max(entrants, key=fitness)
    return {"parent_id": parent.id}

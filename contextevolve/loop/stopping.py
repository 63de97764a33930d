"""When the run stops, decided run-wide over the Evolve Buffer, whichever worker asks.

The stops are paper Alg. 1's iteration budget, plus the target-score, token-budget, cost-budget and
time-budget stops.
"""

from __future__ import annotations

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.llm.pricing import cost, dollars
from contextevolve.loop.resources import memory_of
from contextevolve.memory.store import RunMemory
from contextevolve.roles import TokenUsage, add_usage, total_tokens
from contextevolve.tasks.base import Task


def stop_reason(ctx: RunContext, task: Task, memory: RunMemory,
                spent: tuple[int, float] | None = None) -> str | None:
    """Why no worker should start another iteration now, or None.

    The reasons: the target score (the buffer's best), the token budget (tokens of the committed
    programs), the cost budget (their cost at the run's prices) or the time budget
    (:meth:`~contextevolve.memory.buffer.EvolveBuffer.spent`'s elapsed seconds). The iteration budget is
    the claim's own check (:meth:`~contextevolve.memory.buffer.EvolveBuffer.claim`), which counts the
    children in flight too:
    :func:`budget_spent_reason` words it. ``spent``: the buffer's
    :meth:`~contextevolve.memory.buffer.EvolveBuffer.spent` ``(tokens, seconds)``, when the caller has
    read it already.
    """
    buffer = memory.buffer
    best = buffer.best_by(task.better) if ctx.target_score is not None else None
    if best is not None and (
            best.combined_score == ctx.target_score or task.better(best.combined_score, ctx.target_score)):
        return f"target score reached ({best.combined_score:.6g})"
    tokens, elapsed = spent if spent is not None else buffer.spent()
    if ctx.token_budget is not None and tokens >= ctx.token_budget:
        return f"token budget reached ({tokens}/{ctx.token_budget})"
    if ctx.time_budget_s is not None and elapsed >= ctx.time_budget_s:
        return f"time budget reached ({elapsed / 60:.1f}/{ctx.time_budget_s / 60:.1f} min)"
    if ctx.cost_budget is not None:
        spent_usd = cost(ctx, buffer.token_usage())
        if spent_usd is not None and spent_usd >= ctx.cost_budget:
            return f"cost budget reached ({dollars(spent_usd)}/{dollars(ctx.cost_budget)})"
    return None


def budget_spent_reason(ctx: RunContext) -> str:
    """The stop reason of a worker that found every iteration of the budget claimed."""
    return f"iteration budget reached ({ctx.max_iterations}/{ctx.max_iterations})"


def replies_within_budget(ctx: RunContext, wanted: int, spent: tuple[int, int], workers: int) -> int:
    """How many of a prompt's ``wanted`` other replies a worker claims, so the run ends near its token budget.

    A prompt's replies are asked at once and all paid for, so they are sized before the ask: each child so
    far cost ``tokens / children`` on average; the prompt's first child and its other replies together may
    take the worker's share (``1 / workers``) of what is left of ``ctx.token_budget``. ``wanted`` with no
    token budget, or before any child is committed (nothing to average). ``spent``: ``(tokens, children)``
    of the committed programs, the initial program's tokens counted with the children's.
    """
    tokens, children = spent
    if ctx.token_budget is None or children < 1:
        return wanted
    per_child = max(1.0, tokens / children)
    share = (ctx.token_budget - tokens) / max(1, workers)
    return max(0, min(wanted, int(share // per_child) - 1))


def worker_budget_spent(ctx: RunContext, state: WorkerState, usage: TokenUsage | None = None) -> bool:
    """Whether the worker's iteration in progress has spent its share of the run's token or cost budget.

    The token share is what was left when it was claimed (``ctx.token_budget - state.run_tokens``) split
    evenly over the run's workers (``state.workers``); the cost share is what the committed programs have
    left of ``ctx.cost_budget`` now, split the same way. ``usage``: tokens the calling phase spent that
    ``state.iteration_usage`` does not hold yet. Always False without either budget. Checked before a
    worker asks the model for more of its own work (a second ask, an ask after a behavioural twin), so that a
    run ends close to its budget, as ``compare`` stops a peer (docs/compare.md).
    """
    spent = add_usage(state.iteration_usage, usage)
    workers = max(1, state.workers)
    left = ctx.token_budget - state.run_tokens if ctx.token_budget is not None else None
    if left is not None and total_tokens(spent) >= left / workers:
        return True
    if ctx.cost_budget is not None:
        committed = cost(ctx, memory_of(ctx).buffer.token_usage()) or 0.0
        return (cost(ctx, spent) or 0.0) >= (ctx.cost_budget - committed) / workers
    return False

"""When the loop stops, and how many lanes the next round gets (paper Alg. 1's budget, plus the
target-score, token-budget and time-budget stops)."""

from __future__ import annotations

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import LaneState
from contextevolve.roles import TokenUsage, total_tokens
from contextevolve.tasks.base import Task


def round_size(ctx: RunContext, iteration: int) -> int:
    """Lanes of the next round: ``ctx.parallelism.lanes``, cut to the iterations left (at least 1), so a round
    never overshoots the iteration budget."""
    return max(1, min(ctx.parallelism.lanes, ctx.max_iterations - iteration))


def stop_reason(ctx: RunContext, task: Task, iteration: int, best_score: float | None,
                tokens_used: int, elapsed_s: float = 0.0) -> str | None:
    """Why the loop should stop now, or None. Checks iteration budget, target score, token budget and
    time budget (``elapsed_s``: the run's elapsed wall seconds, ``EvolveState.elapsed_s``)."""
    if iteration >= ctx.max_iterations:
        return f"iteration budget reached ({iteration}/{ctx.max_iterations})"
    if ctx.target_score is not None and best_score is not None and (
            best_score == ctx.target_score or task.better(best_score, ctx.target_score)):
        return f"target score reached ({best_score:.6g})"
    if ctx.token_budget is not None and tokens_used >= ctx.token_budget:
        return f"token budget reached ({tokens_used}/{ctx.token_budget})"
    if ctx.time_budget_s is not None and elapsed_s >= ctx.time_budget_s:
        return f"time budget reached ({elapsed_s / 60:.1f}/{ctx.time_budget_s / 60:.1f} min)"
    return None


def lane_budget_spent(ctx: RunContext, lane: LaneState, usage: TokenUsage | None = None) -> bool:
    """True when ``lane`` has spent its share of the run's token budget: what was left when its round was
    dispatched (``ctx.token_budget - lane.run_tokens``), split evenly over the round's lanes (``lane.round_lanes``,
    what the round was dispatched with, even if a resumed run now names another lane count). ``usage``:
    tokens the calling phase spent that ``lane.iteration_usage`` does not hold yet. Always False without a
    token budget.

    Checked before a lane asks the model for more of its own work (a second ask after a twin, a model
    repair or restart; a free import fix still runs). Without it the budget was checked only between
    rounds, and a last iteration's twin, second ask and restart ran up to ~8,000 tokens past a
    40,000-token budget, where ``compare`` stops a peer as soon as its requests reach the budget.
    """
    if ctx.token_budget is None:
        return False
    first = lane.iteration - lane.lane  # the round's first lane: iterations completed at dispatch
    lanes = lane.round_lanes or round_size(ctx, first)  # (0: a lane checkpointed before round_lanes existed)
    share = (ctx.token_budget - lane.run_tokens) / lanes
    return total_tokens(lane.iteration_usage) + total_tokens(usage) >= share

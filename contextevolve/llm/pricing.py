"""What a run's tokens cost in money: each role's tokens at the price of the model that role calls.

Prices are the run's own (``RunContext.llm.prices``, US dollars per million tokens, from ``--price`` or
a problem's ``config.yaml``); a model without one has no cost, never a guessed one, and a cost that
would need it is ``None`` (shown as tokens only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextevolve.roles import ROLES, TokenUsage

if TYPE_CHECKING:
    from contextevolve.graph.context import RunContext
    from contextevolve.graph.settings import Price


def model_name(role: str, ctx: RunContext) -> str:
    """The model ``role`` calls: its endpoint's model, the embedded model's name when it has none."""
    from contextevolve.llm.embedded import MODEL_ALIAS
    from contextevolve.llm.models import resolve_endpoint

    endpoint = resolve_endpoint(role, ctx)
    return endpoint.model or (MODEL_ALIAS if endpoint.base_url is None else "default")


def unpriced_models(ctx: RunContext) -> list[str]:
    """The models the run's roles call that have no price, sorted."""
    return sorted({model_name(role, ctx) for role in ROLES} - set(ctx.llm.prices))


def price_cost(price: Price, prompt: int, completion: int) -> float:
    """Dollars of ``prompt`` and ``completion`` tokens at ``price`` (per million tokens)."""
    return (prompt * price.input + completion * price.output) / 1e6


def cost(ctx: RunContext, usage: TokenUsage) -> float | None:
    """Dollars of ``usage`` (tokens by role) at the run's prices.

    ``repair`` tokens are the Generator's model's. ``None`` when the run has no prices, or a role that
    spent tokens calls a model without one.
    """
    if not ctx.llm.prices:  # nothing priced: no cost, not $0
        return None
    total = 0.0
    for role, tokens in usage.items():
        prompt, completion = tokens.get("prompt", 0), tokens.get("completion", 0)
        if not prompt and not completion:
            continue
        price = ctx.llm.prices.get(model_name("generator" if role == "repair" else role, ctx))
        if price is None:
            return None
        total += price_cost(price, prompt, completion)
    return total


def saved_cost(settings: dict, usage: TokenUsage) -> float | None:
    """Dollars of ``usage`` at the prices of a run's saved settings (its ``run.json``); None without."""
    from contextevolve.graph.context import RunContext

    if not (settings.get("llm") or {}).get("prices"):
        return None
    try:
        return cost(RunContext.from_json(settings), usage)
    except ValueError:  # settings this version cannot read: no cost rather than a wrong one
        return None


def dollars(value: float | None) -> str:
    """``$0.0123`` (four significant digits below a cent), '' when there is no cost."""
    if value is None:
        return ""
    return f"${value:.2f}" if value >= 1 else f"${value:.4g}"

"""Whether the Navigator and the Sampler agent have spent their share of the run's tokens.

The share is ``search.navigator_sampler_share``. Read by their nodes before they ask their agent: over
it, each does what it does when it has nothing new to say (the last guidance, retrieval's first exemplars).
The share is over the committed programs' tokens (the iteration in flight is not in it yet), so it lags by
at most one iteration per worker. Why the cap: docs/decisions/navigator-sampler-share.md.
"""

from __future__ import annotations

from contextevolve.graph.context import RunContext
from contextevolve.loop.resources import memory_of
from contextevolve.roles import share_of

CAPPED = ("navigator", "sampler")
"""The agents whose calls the share caps (the Summarizer's abstracts are the run's memory: not capped)."""


def share_spent(ctx: RunContext) -> bool:
    """Whether :data:`CAPPED`'s tokens are at least ``ctx.search.navigator_sampler_share`` of the run's.

    Never with the setting 1.0 (the paper asks them whatever they cost).
    """
    cap = ctx.search.navigator_sampler_share
    return cap < 1.0 and share_of(memory_of(ctx).buffer.token_usage(), CAPPED) >= cap

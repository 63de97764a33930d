"""The agents' roles and token-usage bookkeeping: the one place tokens are summed.

A schema module at the bottom of the import layers (``tests/unit/test_layers.py``): state,
records, the LLM layer, the nodes and the reports all book tokens through it.
"""

from __future__ import annotations

from typing import Literal

from contextevolve.agents import AGENTS

ROLES: tuple[str, ...] = tuple(a.name for a in AGENTS)
"""The agents' roles (:data:`contextevolve.agents.AGENTS`), each with its own chat model."""
Role = Literal[ROLES]  # the declared names, for pydantic and readers
"""The name of an agent's role."""
USAGE_ROLES: tuple[str, ...] = ROLES
"""Rows of every token table, in this order: the agents. A role only an older run booked (``repair``: the
Generator's calls that fixed a failed child, before model repairs were removed) follows them where its
records hold it."""

TokenUsage = dict[str, dict[str, int]]
"""Tokens by role: ``{"generator": {"prompt": 1200, "completion": 480}, ...}``."""



def add_usage(left: TokenUsage | None, right: TokenUsage | None) -> TokenUsage:
    """Sum two :data:`TokenUsage` maps role by role (``None`` counts as empty)."""
    out: TokenUsage = {role: dict(v) for role, v in (left or {}).items()}
    for role, counts in (right or {}).items():
        slot = out.setdefault(role, {"prompt": 0, "completion": 0})
        for kind in ("prompt", "completion"):
            slot[kind] = slot.get(kind, 0) + int(counts.get(kind, 0))
    return out


def booked_as(usage: TokenUsage, role: str) -> TokenUsage:
    """``usage`` with every role's counts summed under ``role`` (e.g. Generator tokens spent on a repair)."""
    merged = {"prompt": 0, "completion": 0}
    for counts in (usage or {}).values():
        for kind in merged:
            merged[kind] += int(counts.get(kind, 0))
    return {role: merged} if usage else {}


def role_tokens(counts: dict[str, int] | None) -> int:
    """Prompt plus completion tokens of one role's counts (``{"prompt": 1200, "completion": 480}``)."""
    return int((counts or {}).get("prompt", 0)) + int((counts or {}).get("completion", 0))


def total_tokens(usage: TokenUsage | None) -> int:
    """Prompt plus completion tokens over all roles."""
    return sum(role_tokens(c) for c in (usage or {}).values())


def prompt_tokens(usage: TokenUsage | None) -> int:
    """Prompt tokens over all roles (what a price's input rate applies to)."""
    return sum(int(c.get("prompt", 0)) for c in (usage or {}).values())


def share_of(usage: TokenUsage | None, roles: tuple[str, ...]) -> float:
    """The tokens of ``roles`` as a share of all of ``usage``'s tokens, in [0, 1]; 0.0 for no tokens."""
    total = total_tokens(usage)
    return sum(role_tokens((usage or {}).get(role)) for role in roles) / total if total else 0.0

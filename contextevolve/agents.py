"""The agents, declared once: each one's role name, the phase that asks it, and its defaults.

Everything that lists agents reads :data:`AGENTS`: the roles and token tables, the default caps and
temperatures, the booking of LLM calls by phase, the embedded servers per role, ``--disable`` and
``compare``'s ablations. Adding an agent is its prompt (``contextevolve/prompts/``), its node
(``contextevolve/nodes/``, placed in the loop by :mod:`contextevolve.graph.builder`) and one :class:`Agent`
here; a context agent the user may switch off also has its ``<name>_enabled`` setting in
:class:`~contextevolve.graph.settings.Ablations` (a test checks that the two agree).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Agent:
    """One agent of the loop.

    Attributes:
        name: its role: the name of its chat model (``--role-model NAME=MODEL``), its row in every
            token table, its key in the per-role settings.
        phase: the graph node that asks it (its LLM calls are booked under that phase).
        max_tokens: default completion-token cap of its requests.
        temperature: default sampling temperature of its requests.
        context_agent: one of the paper's context agents, which an ablation switches off
            (``<name>_enabled``, ``--disable NAME``, ``compare``'s ``contextevolve-no-<name>``).
        own_server: with ``embedded_server_per_role`` it gets an embedded server of its own
            (why: docs/decisions/search-settings.md).
    """

    name: str
    phase: str
    max_tokens: int
    temperature: float
    context_agent: bool = True
    own_server: bool = False


AGENTS: tuple[Agent, ...] = (
    Agent("summarizer", phase="summarize", max_tokens=200, temperature=0.2),
    Agent("navigator", phase="navigate", max_tokens=100, temperature=0.7, own_server=True),
    Agent("sampler", phase="sample", max_tokens=80, temperature=0.2),
    Agent("generator", phase="generate", max_tokens=1400, temperature=0.8, context_agent=False,
          own_server=True),
)
"""Every agent, in the order tables list them (why these caps: docs/decisions/search-settings.md)."""

CONTEXT_AGENTS: tuple[str, ...] = tuple(a.name for a in AGENTS if a.context_agent)
"""The names of the agents an ablation may switch off."""


def agent(name: str) -> Agent:
    """The declared agent ``name``.

    Raises:
        KeyError: no such agent (the message names the declared ones).
    """
    for declared in AGENTS:
        if declared.name == name:
            return declared
    raise KeyError(f"unknown agent {name!r}; agents are {', '.join(a.name for a in AGENTS)}")

"""How a chat endpoint can fail an agent call after :func:`~contextevolve.llm.calls.call_role`'s retries.

* :class:`MalformedReply`: the endpoint answered, but not usably (a body that is not JSON,
  JSON without ``choices``, an empty completion, a program cut off at the token cap). The
  calling node falls back (a failed child for the Generator; the usual fallback for the
  context agents) and the run goes on.
* :class:`EndpointUnavailable`: the endpoint cannot be reached, keeps answering 5xx / 429,
  or refuses the request (4xx). The run stops; its checkpoints let ``--resume`` continue it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from contextevolve.roles import TokenUsage


def describe(base_url: str | None, role: str) -> str:
    """How messages name an endpoint: its base URL, or the role's custom chat model when it has none."""
    return base_url or f"the custom {role} chat model"


class MalformedReply(Exception):
    """The endpoint answered ``role`` with a reply that cannot be used.

    Attributes:
        problem: what was wrong with the (last) reply, one line.
        role: the agent role; ``base_url``: its endpoint (``None`` for a custom chat model).
        attempts: requests made; ``usage``: tokens they reported, ``{role: {prompt, completion}}``.
        text: the last reply's text ("" when the body was unreadable).
    """

    def __init__(self, problem: str, *, text: str = "") -> None:
        super().__init__(problem)
        self.problem, self.text = problem, text
        self.role: str = ""
        self.base_url: str | None = None
        self.attempts = 1
        self.usage: TokenUsage = {}

    def __str__(self) -> str:
        if not self.role:
            return self.problem
        return (f"{self.role} reply from {describe(self.base_url, self.role)} unusable after {self.attempts} "
                f"attempt{'s' if self.attempts != 1 else ''}: {self.problem}")


class EndpointUnavailable(RuntimeError):
    """``role``'s endpoint is down, keeps failing, or refuses requests; the run must stop.

    Attributes:
        base_url: the endpoint's base URL (``None`` for a custom chat model).
        role: the agent role whose call failed; ``attempts``: requests made.
        reason: the last error, one line (e.g. ``InternalServerError: Error code: 500``).
        run_dir: the stopped run's directory, set by :func:`contextevolve.api.evolve`
            (``None`` outside a run).
    """

    def __init__(self, base_url: str | None, role: str, reason: str, attempts: int,
                 run_dir: str | Path | None = None) -> None:
        super().__init__(base_url, role, reason, attempts, run_dir)  # args match: picklable
        self.base_url, self.role, self.reason, self.attempts = base_url, role, reason, attempts
        self.run_dir = run_dir

    def __str__(self) -> str:
        instead = ("; to run on the embedded model instead, whatever a config names: --embedded "
                   "(evolve(embedded=True))" if self.base_url else "")
        return (f"LLM endpoint {describe(self.base_url, self.role)} unavailable ({self.role}, "
                f"{self.attempts} attempt{'s' if self.attempts != 1 else ''}): {self.reason}{instead}")

    def resume_command(self) -> str | None:
        """The command that continues the stopped run, or ``None`` when no run directory is known."""
        if self.run_dir is None:
            return None
        return f"contextevolve run --run-dir {shlex.quote(str(self.run_dir))} --resume"

"""Per-call time limit for harnesses running inside the candidate's child process (stdlib only).

A harness wraps each call of the candidate in :func:`time_limit`; a call that overruns
raises :class:`CaseTimeout` in the candidate's frame (SIGALRM), which the harness records
as that case's failure. The whole-process wall clock of
:func:`contextevolve.evaluation.isolation.run_candidate` still applies to a candidate
that blocks or ignores the signal.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


class CaseTimeout(Exception):
    """Raised in the candidate when one call exceeds its time limit."""


def _on_alarm(signum, frame):  # noqa: ARG001
    raise CaseTimeout()


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`CaseTimeout` inside the block after ``seconds`` of wall-clock time."""
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)

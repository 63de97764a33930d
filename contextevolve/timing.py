"""Where an iteration's wall-clock seconds go: by phase, by LLM call, by evaluation step.

A schema module at the bottom of the import layers, beside :mod:`contextevolve.roles` (the tokens): the LLM
layer and the nodes *note* what they spend into the :class:`Stopwatch` of the phase that is running, and the
graph's phase wrapper folds each phase's stopwatch into the iteration's ``seconds`` (a :data:`Seconds` map).
Workers run side by side, so summing a run's phases over its children gives busy seconds, not elapsed time
(:meth:`contextevolve.memory.buffer.EvolveBuffer.spent` gives the elapsed time).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from pydantic import BaseModel

Seconds = dict[str, float]
"""Wall-clock seconds by key (this process's ``time.perf_counter``; a candidate never reports any).

* ``"<phase>"``: the whole phase (``generate``, ``evaluate``, ``repair``, ...), e.g. ``{"generate": 41.2}``;
* ``"<phase>.llm"``: the part of it spent waiting for LLM replies (every attempt, retries included);
* ``"evaluate.precheck"`` / ``"evaluate.full"``: pre-checks and full evaluations inside ``evaluate``
  (re-evaluations after a repair add to them);
* ``"evaluate.import"`` / ``"evaluate.calls"``: of the full evaluations, the sandbox's start and import of the
  candidate, and its timed calls (the supervisor's measurements); the rest of ``evaluate.full`` is sandbox
  start-up, grading and clean-up.
"""


class LLMCall(BaseModel):
    """One agent request as this process saw it (all its attempts): role, tokens, wall seconds."""

    phase: str = ""
    """The phase that made it (``generate``, ``repair``, ...); empty outside the graph."""
    role: str
    """The chat model's role (a repair is a ``generator`` request in phase ``repair``)."""
    prompt: int = 0
    """Prompt tokens, summed over attempts (as reported by the endpoint)."""
    completion: int = 0
    """Completion tokens, summed over attempts."""
    seconds: float = 0.0
    """Wall seconds from the first request to the last reply, backoff waits included."""
    attempts: int = 1
    """Requests sent (1 + retries)."""
    ok: bool = True
    """False when no usable reply came back (the caller fell back)."""


def add_seconds(left: Seconds | None, right: Seconds | None) -> Seconds:
    """Sum two :data:`Seconds` maps key by key (``None`` counts as empty)."""
    out = dict(left or {})
    for key, value in (right or {}).items():
        out[key] = round(out.get(key, 0.0) + float(value), 3)
    return out


class Stopwatch:
    """What one phase spent: extra :data:`Seconds` keys and its LLM calls (see :func:`phase_clock`)."""

    def __init__(self, phase: str):
        self.phase = phase
        self.seconds: Seconds = {}
        self.calls: list[LLMCall] = []

    def add(self, key: str, seconds: float) -> None:
        """Add ``seconds`` under ``key`` (e.g. ``evaluate.precheck``)."""
        self.seconds = add_seconds(self.seconds, {key: seconds})

    def call(self, call: LLMCall) -> None:
        """Keep one LLM request and add its seconds to ``<phase>.llm``."""
        self.calls.append(call.model_copy(update={"phase": self.phase}))
        self.add(f"{self.phase}.llm", call.seconds)


_current: contextvars.ContextVar[Stopwatch | None] = contextvars.ContextVar("contextevolve_stopwatch",
                                                                           default=None)


def note_call(call: LLMCall) -> None:
    """Book an LLM request on the running phase's stopwatch (nothing outside a phase)."""
    watch = _current.get()
    if watch is not None:
        watch.call(call)


def note(key: str, seconds: float) -> None:
    """Book ``seconds`` under ``key`` on the running phase's stopwatch (nothing outside a phase)."""
    watch = _current.get()
    if watch is not None:
        watch.add(key, seconds)


@contextmanager
def phase_clock(phase: str) -> Iterator[Stopwatch]:
    """Time the block as phase ``phase``; nested clocks are independent.

    On exit the stopwatch holds ``{phase: wall seconds}`` plus whatever the block noted (:func:`note`,
    :func:`note_call`).
    """
    watch = Stopwatch(phase)
    token = _current.set(watch)
    started = time.perf_counter()
    try:
        yield watch
    finally:
        watch.add(phase, time.perf_counter() - started)
        _current.reset(token)


def by_phase(seconds: Seconds) -> dict[str, dict[str, float]]:
    """Per whole phase of a :data:`Seconds` map, slowest first: ``{"seconds", "llm", "share"}``.

    Its seconds, the part spent waiting for LLM replies, and its share (0 to 1) of all phases' seconds.
    """
    phases = {key: value for key, value in seconds.items() if "." not in key}
    whole = sum(phases.values()) or 1.0
    return {phase: {"seconds": value, "llm": seconds.get(f"{phase}.llm", 0.0), "share": value / whole}
            for phase, value in sorted(phases.items(), key=lambda kv: -kv[1])}


def wall(seconds: Seconds) -> float:
    """Wall seconds of a :data:`Seconds` map: its whole phases summed.

    ``"<phase>.<part>"`` keys are parts of a phase, already inside it.
    """
    return sum(spent["seconds"] for spent in by_phase(seconds).values())


def llm_by_role(calls: Iterable[LLMCall]) -> dict[str, dict[str, float]]:
    """LLM requests summed by usage role: ``{"generator": {"calls", "seconds", "prompt", "completion"}}``.

    A request made in phase ``repair`` counts as ``repair``, as its tokens do.
    """
    return _summed(calls, lambda call: "repair" if call.phase == "repair" else call.role)


def llm_by_phase(calls: Iterable[LLMCall]) -> dict[str, dict[str, float]]:
    """LLM requests summed by the phase that made them: ``{"generate": {"calls", "seconds", ...}}``.

    The seconds table's columns beside each phase (one role's requests may come from two phases: the
    Generator's from ``generate`` and ``no_effect_ask``).
    """
    return _summed(calls, lambda call: call.phase)


def _summed(calls: Iterable[LLMCall], key) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for call in calls:
        row = out.setdefault(key(call), {"calls": 0, "seconds": 0.0, "prompt": 0, "completion": 0})
        row["calls"] += 1
        row["seconds"] = round(row["seconds"] + call.seconds, 3)
        row["prompt"] += call.prompt
        row["completion"] += call.completion
    return out

"""A person's hand on a running run: pause before the next claim, write the next child's guidance.

One :class:`Steering` per run directory and process (:func:`steering_for`), reached by the nodes through
their run settings (:func:`steering_of`): ``claim`` waits while the run is paused, ``review`` hands the
Navigator's guidance to a person who asked to write the next child's and waits for their text. The live
view's page drives it (``contextevolve run --serve``); in Python, ``steering_for(run_dir)`` does. Until a
person asks for something, both checks return at once. A pause or a wait never holds a request to the LLM
or an evaluation: claim and review run before either.
"""

from __future__ import annotations

import threading
from pathlib import Path

from contextevolve.graph.context import RunContext

POLL_S = 0.5
"""How often a waiting worker looks again (a stop, an interrupted process)."""


class Steering:
    """Pause / resume and the next child's guidance, shared by the workers and the page (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self.paused = False
        """No worker claims another iteration while set (those under way finish)."""
        self.edit_requested = False
        """A person will write the guidance of the next child to reach review."""
        self.waiting: dict | None = None
        """The review waiting for that person: ``worker``, ``child_id``, ``parent_id``, ``guidance`` (the
        Navigator's); ``None`` while none waits."""
        self._answer: str | None = None
        self._stopped = False

    def state(self) -> dict:
        """``{"paused", "edit_requested", "waiting"}`` as the page shows them."""
        with self._lock:
            return {"paused": self.paused, "edit_requested": self.edit_requested, "waiting": self.waiting}

    def pause(self) -> None:
        """Stop claiming iterations after those under way."""
        with self._lock:
            self.paused = True

    def resume(self) -> None:
        """Claim iterations again."""
        with self._lock:
            self.paused = False
            self._lock.notify_all()

    def request_edit(self) -> None:
        """Ask to write the guidance of the next child that reaches review (it waits for :meth:`answer`)."""
        with self._lock:
            self.edit_requested = True

    def answer(self, text: str | None, child_id: str | None = None) -> bool:
        """The person's guidance for the waiting child (``None`` or blank: keep the Navigator's).

        With ``child_id``, only for that child: False (nothing done) when another one waits, or none.
        Without, given before a child waits, it cancels the request.
        """
        with self._lock:
            if child_id is not None and (self.waiting is None or self.waiting["child_id"] != child_id):
                return False
            if self.waiting is None:
                self.edit_requested = False
            else:
                self._answer = text if text is not None else ""
            self._lock.notify_all()
            return True

    def stop(self) -> None:
        """Release every waiting worker (the run ends).

        The pause and an edit request are dropped; new ones are ignored until :meth:`open`.
        """
        with self._lock:
            self._stopped = True
            self.paused = self.edit_requested = False
            self._lock.notify_all()

    def open(self) -> None:
        """Take pauses and edits again (a run starts in this process; a pause asked before it is kept)."""
        with self._lock:
            self._stopped = False

    def wait_while_paused(self) -> None:
        """Return once the run is not paused (at once when it is not, or after :meth:`stop`)."""
        with self._lock:
            while self.paused and not self._stopped:
                self._lock.wait(POLL_S)

    def review(self, worker: int | None, child_id: str | None, parent_id: str | None,
               guidance: str) -> str | None:
        """The person's guidance for this child when they asked to write it, else ``None`` (at once).

        Waits, showing ``guidance`` (the Navigator's) in :attr:`waiting`, until :meth:`answer` or
        :meth:`stop`; a blank answer keeps the Navigator's (``None``).
        """
        with self._lock:
            if not self.edit_requested or self._stopped or self.waiting is not None:
                return None
            self.edit_requested = False
            self.waiting = {"worker": worker, "child_id": child_id, "parent_id": parent_id,
                            "guidance": guidance}
            self._answer = None
            try:
                while self._answer is None and not self._stopped:
                    self._lock.wait(POLL_S)
                text = self._answer
            finally:  # (also when the wait is interrupted: no child is left shown as waiting)
                self.waiting, self._answer = None, None
        return text.strip() if text and text.strip() else None


_STEERING: dict[str, Steering] = {}
_REGISTRY_LOCK = threading.Lock()


def steering_for(run_dir: str | Path) -> Steering:
    """The :class:`Steering` of the run in ``run_dir`` in this process (made on first use)."""
    key = str(Path(run_dir).resolve())
    with _REGISTRY_LOCK:
        return _STEERING.setdefault(key, Steering())


def steering_of(ctx: RunContext) -> Steering:
    """The :class:`Steering` of ``ctx``'s run."""
    return steering_for(ctx.run_dir)

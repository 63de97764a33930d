"""Iterations claimed by workers: the ``claims`` table of the Evolve Buffer.

A worker claims an iteration number before it asks any LLM, so a child's id is known and kept in its
checkpoint; the table says which worker holds which number, which were handed over to the Summarizer behind
the worker, and (with the ``programs`` table) which are finished. :class:`Claims` is mixed into
:class:`~contextevolve.memory.buffer.EvolveBuffer`, whose connection and lock it uses.
"""

from __future__ import annotations

import sqlite3
import threading


class Claims:
    """The claim methods of :class:`~contextevolve.memory.buffer.EvolveBuffer` (one transaction each)."""

    _db: sqlite3.Connection
    _lock: threading.Lock

    def claim(self, worker: int, limit: int) -> int | None:
        """The iteration number of ``worker``'s next child, claimed atomically; None when the budget is spent.

        One SQLite transaction, so two workers, even of two processes, never get the same one: the worker's
        own claim whose child is not committed yet if it has one (a worker killed mid-iteration resumes it);
        else the lowest number not claimed (a claim :meth:`release_gone` gave back, or the next one), unless
        ``limit`` iterations are claimed already (then None: the iteration budget is spent). A claim handed
        over (:meth:`hand_over`) is never given out again.
        """
        unfinished = ("SELECT c.iteration FROM claims c LEFT JOIN programs p ON p.iteration = c.iteration "
                      "AND p.committed = 1 WHERE p.id IS NULL AND c.handed = 0 AND {} "
                      "ORDER BY c.iteration LIMIT 1")
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(unfinished.format("c.worker = ?"), (worker,)).fetchone()
                if row is None:
                    count, top = self._db.execute("SELECT COUNT(*), MAX(iteration) FROM claims").fetchone()
                    if count < limit:
                        gap = count < (top or 0)  # a claim was given back below the highest
                        row = self._db.execute(
                            "SELECT MIN(iteration) + 1 FROM claims WHERE iteration + 1 NOT IN "
                            "(SELECT iteration FROM claims)").fetchone() if gap else ((top or 0) + 1,)
                        if gap and not self._db.execute(
                                "SELECT 1 FROM claims WHERE iteration = 1").fetchone():
                            row = (1,)
                        self._db.execute("INSERT INTO claims VALUES (?, ?, 0)", (row[0], worker))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return None if row is None else row[0]

    def stored_reply(self, worker: int) -> int | None:
        """The number of ``worker``'s lowest unfinished claim whose child is stored already, or None.

        Such a child is a reply to an earlier iteration's prompt (``search.samples_per_prompt``), or the
        worker's own child whose checkpoint was lost after generate: either way its next phase is evaluate.
        """
        with self._lock:
            row = self._db.execute(
                "SELECT c.iteration FROM claims c JOIN programs p ON p.iteration = c.iteration "
                "WHERE p.committed = 0 AND c.handed = 0 AND c.worker = ? ORDER BY c.iteration LIMIT 1",
                (worker,)).fetchone()
        return None if row is None else row[0]

    def claim_more(self, worker: int, limit: int, count: int, taken: int) -> list[int]:
        """Up to ``count`` more numbers for ``worker`` beside its claim ``taken``: a prompt's other replies.

        One SQLite transaction: first the worker's own unfinished claims other than ``taken`` that no record
        was stored for yet (a prompt's claims whose checkpoint was lost), then the lowest numbers not
        claimed, while fewer than ``limit`` iterations are claimed. Fewer than ``count`` (none) when the
        iteration budget is spent.
        """
        if count <= 0:
            return []
        mine = ("SELECT c.iteration FROM claims c LEFT JOIN programs p ON p.iteration = c.iteration "
                "WHERE p.id IS NULL AND c.handed = 0 AND c.worker = ? AND c.iteration != ? "
                "ORDER BY c.iteration LIMIT ?")
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                numbers = [r[0] for r in self._db.execute(mine, (worker, taken, count)).fetchall()]
                claimed = {r[0] for r in self._db.execute("SELECT iteration FROM claims").fetchall()}
                # (a number whose child is stored, a reply of a worker gone from the run, is left to claim)
                stored = {r[0] for r in self._db.execute("SELECT iteration FROM programs").fetchall()}
                number = 0
                while len(numbers) < count and len(claimed) < limit and number < limit:
                    number += 1
                    if number not in claimed and number not in stored:
                        self._db.execute("INSERT INTO claims VALUES (?, ?, 0)", (number, worker))
                        claimed.add(number)
                        numbers.append(number)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return numbers

    def release_gone(self, workers: int) -> list[int]:
        """Give back the claims of workers a run no longer has, before it goes on with ``workers`` workers.

        The unfinished claims of the workers with an index >= ``workers`` (a run resumed with fewer) are
        given back, so that they are made again. Returns their handed-over claims whose child is not
        committed yet (to be finished, not made again).
        """
        done = "SELECT iteration FROM programs WHERE committed = 1"
        with self._lock:
            self._db.execute(f"DELETE FROM claims WHERE worker >= ? AND handed = 0 AND iteration "
                             f"NOT IN ({done})", (workers,))
            rows = self._db.execute(f"SELECT iteration FROM claims WHERE worker >= ? AND handed = 1 AND "
                                    f"iteration NOT IN ({done}) ORDER BY iteration", (workers,)).fetchall()
        return [r[0] for r in rows]

    def hand_over(self, iteration: int) -> None:
        """Mark ``iteration``'s claim as handed over.

        Its worker is done with it and its commit is on its way (the Summarizer behind the worker,
        :mod:`contextevolve.loop.behind`), so the worker's next claim is a new iteration, not this one.
        """
        with self._lock:
            self._db.execute("UPDATE claims SET handed = 1 WHERE iteration = ?", (iteration,))

    def handed_over(self, worker: int) -> list[int]:
        """``worker``'s handed-over claims whose child is not committed yet, in order."""
        with self._lock:
            rows = self._db.execute(
                "SELECT c.iteration FROM claims c LEFT JOIN programs p ON p.iteration = c.iteration AND "
                "p.committed = 1 WHERE p.id IS NULL AND c.handed = 1 AND c.worker = ? ORDER BY c.iteration",
                (worker,)).fetchall()
        return [r[0] for r in rows]

    def claims(self) -> dict[int, int]:
        """Every claimed iteration -> the worker holding it."""
        with self._lock:
            return dict(self._db.execute("SELECT iteration, worker FROM claims").fetchall())

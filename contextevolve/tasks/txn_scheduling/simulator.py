"""The conflict simulator of Transaction Scheduling (stdlib only; shared by harness and grader).

A transaction is a sequence of ``(op, key)`` operations, ``op`` in ``{"r", "w"}``, one per time step.
Transactions are placed in the given order, each at the earliest start where every operation comes
strictly after each conflicting one already placed (same key, at least one a write): the order is the
serialization order, yet a later transaction may start earlier. The makespan is the time the last
operation ends (docs/tasks.md, *Transaction Scheduling*; after Cheng et al. 2024).
"""

from __future__ import annotations

from collections.abc import Sequence

Txn = Sequence[tuple[str, int]]


class ScheduleState:
    """Incremental placement: per key the last read/write step of the transactions placed so far.

    ``place(txn)`` puts one transaction at its earliest start and returns that start;
    ``cost_if_placed(txn)`` is the makespan the schedule would have after placing it.
    Both cost O(len(txn)).
    """

    __slots__ = ("last_access", "last_write", "makespan")

    def __init__(self) -> None:
        self.last_access: dict[int, int] = {}
        self.last_write: dict[int, int] = {}
        self.makespan = 0

    def earliest_start(self, txn: Txn) -> int:
        """First time step at which ``txn`` can start after everything placed so far."""
        start = 0
        for step, (op, key) in enumerate(txn):
            bound = (self.last_access if op == "w" else self.last_write).get(key)
            if bound is not None and bound + 1 - step > start:
                start = bound + 1 - step
        return start

    def cost_if_placed(self, txn: Txn) -> int:
        """Makespan after placing ``txn`` (the state is not changed)."""
        return max(self.makespan, self.earliest_start(txn) + len(txn))

    def place(self, txn: Txn) -> int:
        """Place ``txn`` at its earliest start; returns the start time step."""
        start = self.earliest_start(txn)
        for step, (op, key) in enumerate(txn):
            t = start + step
            if self.last_access.get(key, -1) < t:
                self.last_access[key] = t
            if op == "w" and self.last_write.get(key, -1) < t:
                self.last_write[key] = t
        self.makespan = max(self.makespan, start + len(txn))
        return start


def makespan(txns: Sequence[Txn], order: Sequence[int]) -> int:
    """Makespan (time steps) of running ``txns`` in ``order`` (a sequence of indices into ``txns``)."""
    state = ScheduleState()
    for i in order:
        state.place(txns[i])
    return state.makespan

"""Untrusted side of Transaction Scheduling: hand one workload to ``get_best_schedule``, serialise the order.

Runs in the sandbox's runner next to the candidate, which can replace any of it. Imports only the
stdlib and :mod:`contextevolve.tasks.txn_scheduling.simulator` (staged by the task's
``EvalJob.modules``). Nothing is timed here and the candidate's exceptions propagate; its claimed
cost is passed on, never used: the grader recomputes the makespan (docs/tasks.md, *Transaction
Scheduling*).
"""

from __future__ import annotations

from itertools import islice

from contextevolve.tasks.txn_scheduling.simulator import ScheduleState, makespan


class Workload:
    """What ``get_best_schedule`` receives.

    Attributes:
        txns: tuple of transactions; each a tuple of ``(op, key)`` with op ``"r"`` or ``"w"``.
        num_txns: ``len(txns)``.
    """

    def __init__(self, txns):
        self.txns = tuple(tuple((op, key) for op, key in txn) for txn in txns)
        self.num_txns = len(self.txns)

    def makespan(self, order) -> int:
        """Makespan (time steps) of scheduling the transactions in ``order`` (indices)."""
        return makespan(self.txns, order)

    def new_state(self) -> ScheduleState:
        """An empty incremental schedule: ``place(txn)``, ``cost_if_placed(txn)``, ``.makespan``."""
        return ScheduleState()


def _describe(obj) -> str:
    return f"{type(obj).__name__} {str(obj)[:40]}"


def _order_of(value, num_txns: int) -> dict:
    """Serialise the candidate's return value ``(cost, order)`` without trusting its types.

    At most ``num_txns + 1`` entries of the order are read (enough for the grader to see a
    too-long order); the claimed cost is kept only when it is a plain int or float.
    """
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return {"bad": f"returned {type(value).__name__}, expected (cost, order)"}
    try:
        items = list(islice(iter(value[1]), num_txns + 1))
    except TypeError:
        return {"bad": f"order is {type(value[1]).__name__}, expected a list of ints"}
    bad = [i for i in items if type(i) is not int][:1]
    if bad:
        return {"bad": f"order holds {_describe(bad[0])}, expected ints"}
    claimed = value[0]
    if type(claimed) not in (int, float) or claimed != claimed or abs(claimed) > 1e15:
        claimed = None  # not a plain finite number (JSON could not carry it, or it is absurd)
    return {"order": items, "claimed_cost": claimed}


def schedule(candidate, args: dict, blobs: dict) -> tuple[dict, dict]:  # noqa: ARG001 - no binary inputs
    """Call ``candidate.get_best_schedule(workload, num_seqs)`` on one workload.

    Args: ``{"num_seqs": int, "txns": [[[op, key], ...], ...]}`` (this workload's transactions only).
    Returns ``({"order": [int], "claimed_cost": number | None} | {"bad": str}, {})``.
    """
    workload = Workload(args["txns"])
    value = candidate.get_best_schedule(workload, args["num_seqs"])
    return _order_of(value, workload.num_txns), {}

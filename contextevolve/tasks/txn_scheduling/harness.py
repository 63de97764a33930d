"""Runs inside the candidate's child process: hand each workload to ``get_best_schedule`` and serialise the order.

Only stdlib imports. The candidate's claimed cost is recorded but never used: the
grader recomputes the makespan from the returned order with its own workloads.
"""

from __future__ import annotations

from time import perf_counter  # bound before the candidate is imported: patching time.perf_counter cannot fake speed

from contextevolve.evaluation.time_limit import CaseTimeout, time_limit
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


def _order_of(value) -> dict:
    """Serialise the candidate's return value ``(cost, order)`` without trusting its types."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return {"bad": f"returned {type(value).__name__}, expected (cost, order)"}
    try:
        items = list(value[1])
    except TypeError:
        return {"bad": f"order is {type(value[1]).__name__}, expected a list of ints"}
    if any(type(i) is not int for i in items):
        bad = next(i for i in items if type(i) is not int)
        return {"bad": f"order holds {type(bad).__name__} {str(bad)[:40]}, expected ints"}
    claimed = value[0] if isinstance(value[0], (int, float)) and not isinstance(value[0], bool) else None
    return {"order": items, "claimed_cost": claimed}


def run(candidate, payload: dict) -> dict:
    """Call ``candidate.get_best_schedule(workload, num_seqs)`` on every workload of ``payload``.

    Payload: ``{"case_timeout_s": float, "num_seqs": int, "workloads": [[[op, key], ...], ...]}``.
    Returns ``{"cases": [{"ok": True, "seconds": s, "order": [int] | "bad": str, "claimed_cost": x}
    | {"ok": False, "error": str}]}``.
    """
    fn = getattr(candidate, "get_best_schedule", None)
    if not callable(fn):
        raise AttributeError("the program defines no function get_best_schedule(workload, num_seqs)")
    out = []
    for txns in payload["workloads"]:
        workload = Workload(txns)
        start = perf_counter()
        try:
            with time_limit(payload["case_timeout_s"]):
                value = fn(workload, payload["num_seqs"])
        except CaseTimeout:
            out.append({"ok": False, "error": f"exceeded {payload['case_timeout_s']:g} s"})
            continue
        except Exception as exc:  # noqa: BLE001 - the candidate's failure, recorded per workload
            out.append({"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
            continue
        out.append({"ok": True, "seconds": perf_counter() - start, **_order_of(value)})
    return {"cases": out}

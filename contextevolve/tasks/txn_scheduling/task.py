"""Transaction Scheduling task: description, the trusted grader and its metrics.

One call per workload. ``makespan`` is the total over the three workloads of the makespan recomputed
here (:func:`simulator.makespan`) for the returned order, a failed workload counting its serial
makespan; ``validity`` the share of workloads that returned an order; ``combined_score`` = validity ×
1000 / (1 + makespan) × 1000. All calls failed: ``failed``, with the first error; an order that is no
permutation of the indices: ``invalid``; the claimed cost is ignored. Why: docs/tasks.md,
*Transaction Scheduling*.
"""

from __future__ import annotations

import math

from contextevolve.tasks.base import Call, CallResult, CandidateRun, EvalJob, Evaluation, MetricSpec, Task
from contextevolve.tasks.txn_scheduling.simulator import makespan
from contextevolve.tasks.txn_scheduling.workloads import SPECS, workloads

HARNESS = "contextevolve.tasks.txn_scheduling.harness"
SIMULATOR = "contextevolve.tasks.txn_scheduling.simulator"
"""Imported by the harness (so staged into the sandbox); nothing else of the package is."""
ENTRY = "get_best_schedule"
CASE_TIMEOUT_S = 10.0
NUM_SEQS = 10
_ORDER_KEYS = frozenset({"order", "claimed_cost"})


def serial_makespan() -> int:
    """Makespan when no two transactions overlap: the sum of all transaction lengths."""
    return sum(workload_serial_makespan(w) for w in workloads())


def workload_serial_makespan(txns) -> int:
    """The worst makespan of one workload: its transactions one after another (sum of their lengths)."""
    return sum(len(t) for t in txns)


def score(total_makespan: float, validity: float) -> float:
    """ADRS combined score: validity × 1000 / (1 + total makespan) × 1000."""
    return validity * 1000.0 / (1.0 + total_makespan) * 1000.0


DESCRIPTION = f"""\
Transaction Scheduling. Order database transactions to minimise the makespan.
Implement `get_best_schedule(workload, num_seqs) -> (cost, order)`. `workload.txns` is a list of
{SPECS[0].num_txns} transactions, each a list of (op, key) with op "r" (read) or "w" (write), one operation
per time step. Transactions are placed in `order`, each at the earliest start time at which every one
of its operations comes strictly after all conflicting operations of transactions placed before it
(same key and at least one is a write; reads may overlap). Makespan = time the last operation ends.
`order` must be a permutation of range(workload.num_txns) (ints, each once). Helpers:
`workload.makespan(order)`; `workload.new_state()` gives an incremental schedule with
`cost_if_placed(txn)`, `earliest_start(txn)`, `place(txn)` and `.makespan`. num_seqs={NUM_SEQS} is \
a hint for
the number of restarts. Three workloads (hot keys: Zipf-skewed keys, 15-50% writes).
Score = validity * 1e6 / (1 + total makespan over the 3 workloads); higher is better. validity = fraction
of workloads scheduled; a workload whose call raises or takes more than {CASE_TIMEOUT_S:g} s counts \
with its serial
makespan (all transactions back to back) and lowers validity. Keep each call < {CASE_TIMEOUT_S:g} s.
"""


class TxnScheduling(Task):
    """ADRS Transaction Scheduling: minimise the makespan of three conflict-heavy workloads."""

    name = "txn_scheduling"
    title = "Transaction Scheduling (TS)"
    description = DESCRIPTION
    higher_is_better = True
    timeout_s = 60.0
    baseline_files = {"heuristic": "heuristic.py", "human_sota": "human_sota.py"}

    def __init__(self) -> None:
        self.metrics = [
            MetricSpec(name="makespan", higher_is_better=False, worst=float(serial_makespan()),
                       description="total makespan over the 3 workloads, time steps"),
            MetricSpec(name="validity", description="fraction of workloads scheduled in time"),
        ]

    def job(self) -> EvalJob:
        """One call per workload (inputs: that workload's transactions and ``num_seqs``), 10 s each."""
        return EvalJob(harness=HARNESS, entry=ENTRY, modules=[SIMULATOR], calls=[
            Call(fn="schedule", args={"num_seqs": NUM_SEQS, "txns": [[list(op) for op in txn] for txn in w]},
                 timeout_s=CASE_TIMEOUT_S) for w in workloads()])

    def grade_run(self, run: CandidateRun) -> Evaluation:
        """Recompute the makespans of the returned orders with our own workloads; never raises.

        A failed call counts with its workload's serial makespan and lowers validity; output
        that breaks the contract makes the program ``invalid``.
        """
        loads = workloads()
        if len(run.calls) != len(loads):
            return self.rejected("invalid", f"{len(run.calls)} results for {len(loads)} workloads")
        total, valid, lines, errors = 0, 0, [], []
        for spec, txns, call in zip(SPECS, loads, run.calls):
            if call.status != "ok":
                errors.append(f"{spec.name}: {call.status}: {str(call.error)[:200]} "
                              f"(counted at its serial makespan {workload_serial_makespan(txns)})")
                total += workload_serial_makespan(txns)
                continue
            try:
                order, claimed = _parse_output(call, len(txns))
            except _Invalid as exc:
                return self.rejected("invalid", f"{spec.name}: {exc}")
            cost = makespan(txns, order)
            total += cost
            valid += 1
            note = ("" if claimed == cost
                    else f" (program claimed {'nothing usable' if claimed is None else claimed})")
            # (no call seconds: they are not part of the score, and a note that differs from one evaluation
            # of the same program to the next would make two runs with one seed ask different prompts)
            lines.append(f"{spec.name}: makespan {cost}{note}")
        if not valid:
            return self.rejected("failed", f"every workload failed; first: {errors[0]}",
                                 diagnostics="\n".join(errors[:3]))
        validity = valid / len(loads)
        return Evaluation(status="ok", metrics={"makespan": float(total), "validity": validity},
                          combined_score=score(total, validity),
                          diagnostics="\n".join(lines + errors[:2]))


class _Invalid(Exception):
    """A contract violation found while grading; its message is the reason."""


def _parse_output(call: CallResult, n: int) -> tuple[list[int], int | float | None]:
    """``(order, claimed cost)`` of one call's value, checked against the schema; raises :class:`_Invalid`.

    Schema: ``{"order": [int, ...], "claimed_cost": int | float | None}`` (``claimed_cost``
    optional), the order a permutation of ``range(n)``; or the harness's ``{"bad": str}``.
    """
    value = call.value
    if not isinstance(value, dict):
        raise _Invalid(f"malformed output: {type(value).__name__}, expected an object with an order")
    if set(value) == {"bad"} and isinstance(value["bad"], str):
        raise _Invalid(value["bad"][:200])
    if "order" not in value or not set(value) <= _ORDER_KEYS:
        raise _Invalid(f"malformed output: keys {sorted(str(k)[:20] for k in value)[:5]}, expected order "
                       "and claimed_cost")
    order = value["order"]
    problem = _permutation_problem(order, n)
    if problem:
        raise _Invalid(problem)
    return order, _plain_number(value.get("claimed_cost"))


def _plain_number(x: object) -> int | float | None:
    """``x`` when it is an int or a finite float of magnitude at most 1e15, else None (for diagnostics)."""
    if type(x) is int:
        return x if abs(x) <= 10**15 else None
    if type(x) is float:
        return x if math.isfinite(x) and abs(x) <= 1e15 else None
    return None


def _permutation_problem(order: object, n: int) -> str:
    """Why ``order`` is not a permutation of ``range(n)``; empty when it is (length checked before items)."""
    if not isinstance(order, list):
        return "order is not a list of ints"
    if len(order) > n:
        return f"order has more than {n} entries for {n} transactions"
    if any(type(i) is not int for i in order):
        return "order holds something other than ints, expected ints"
    if len(order) != n:
        return f"order has {len(order)} entries for {n} transactions"
    seen = set()
    for i in order:
        if not 0 <= i < n:
            shown = i if abs(i) < 10**9 else "a huge int"
            return f"order holds {shown}, not a transaction index (0..{n - 1})"
        if i in seen:
            return f"transaction {i} scheduled twice"
        seen.add(i)
    return ""

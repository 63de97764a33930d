"""Transaction Scheduling task: description, the trusted grader and its metrics.

Metrics (ADRS txn_scheduling, DESIGN.md §6):

* ``makespan``: total over the three workloads of the makespan (time steps) of the
  returned order, recomputed here with :func:`simulator.makespan` on our own copy of
  the workloads (lower is better). A workload whose call raised or ran out of time
  counts with its serial makespan (all transactions back to back), the worst order.
* ``validity``: fraction of workloads that returned an order in time.
* ``combined_score`` = validity × 1000 / (1 + makespan) × 1000 (ADRS's formula; the
  paper's "score ≈ 1000 / makespan" with makespans in thousands).

Holes closed: the candidate's claimed cost is ignored, and every returned order must be
a true permutation of the workload's transaction indices (ints, each exactly once);
anything else makes the whole program ``invalid`` with score 0.
"""

from __future__ import annotations

from contextevolve.evaluation.isolation import CandidateRun
from contextevolve.tasks.base import EvalJob, Evaluation, MetricSpec, Task
from contextevolve.tasks.txn_scheduling.simulator import makespan
from contextevolve.tasks.txn_scheduling.workloads import SPECS, workloads

HARNESS = "contextevolve.tasks.txn_scheduling.harness:run"
CASE_TIMEOUT_S = 10.0
NUM_SEQS = 10


def serial_makespan() -> int:
    """Makespan when no two transactions overlap: the sum of all transaction lengths."""
    return sum(len(t) for w in workloads() for t in w)


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
`cost_if_placed(txn)`, `earliest_start(txn)`, `place(txn)` and `.makespan`. num_seqs={NUM_SEQS} is a hint for
the number of restarts. Three workloads (hot keys: Zipf-skewed keys, 15-50% writes).
Score = 1e6 / (1 + total makespan over the 3 workloads); higher is better. Keep each call < {CASE_TIMEOUT_S:g} s.
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
        """Inputs for the child: the three workloads (JSON)."""
        loads = workloads()
        return EvalJob(harness=HARNESS, payload={
            "case_timeout_s": CASE_TIMEOUT_S, "num_seqs": NUM_SEQS,
            "workloads": [[[list(op) for op in txn] for txn in w] for w in loads]})

    def grade_run(self, run: CandidateRun) -> Evaluation:
        """Recompute the makespans of the returned orders (see :meth:`grade`)."""
        return self.grade(run.result)

    def grade(self, result: object) -> Evaluation:
        """Score harness output ``result`` against our own workloads; never raises."""
        loads = workloads()
        cases = result.get("cases") if isinstance(result, dict) else None
        if not isinstance(cases, list) or len(cases) != len(loads):
            return self.rejected("invalid", "malformed harness output")
        total, valid, lines, errors = 0, 0, [], []
        for spec, txns, case in zip(SPECS, loads, cases):
            if not isinstance(case, dict):
                return self.rejected("invalid", "malformed harness output")
            if not case.get("ok"):
                errors.append(f"{spec.name}: {case.get('error', 'failed')}")
                total += sum(len(t) for t in txns)
                continue
            if "bad" in case:
                return self.rejected("invalid", f"{spec.name}: {case['bad']}")
            order = case.get("order")
            problem = _permutation_problem(order, len(txns))
            if problem:
                return self.rejected("invalid", f"{spec.name}: {problem}")
            cost = makespan(txns, order)
            total += cost
            valid += 1
            claimed = case.get("claimed_cost")
            note = "" if claimed == cost else f" (program claimed {claimed})"
            lines.append(f"{spec.name}: makespan {cost}{note}, {case.get('seconds', 0):.2f} s")
        if not valid:
            return self.rejected("failed", f"every workload failed; first: {errors[0]}",
                                 diagnostics="\n".join(errors[:3]))
        validity = valid / len(loads)
        return Evaluation(status="ok", metrics={"makespan": float(total), "validity": validity},
                          combined_score=score(total, validity),
                          diagnostics="\n".join(lines + errors[:2]))


def _permutation_problem(order: object, n: int) -> str:
    """Why ``order`` is not a permutation of ``range(n)``; empty when it is."""
    if not isinstance(order, list) or any(type(i) is not int for i in order):
        return "order is not a list of ints"
    if len(order) != n:
        return f"order has {len(order)} entries for {n} transactions"
    seen = set()
    for i in order:
        if not 0 <= i < n:
            return f"order holds {i}, not a transaction index (0..{n - 1})"
        if i in seen:
            return f"transaction {i} scheduled twice"
        seen.add(i)
    return ""

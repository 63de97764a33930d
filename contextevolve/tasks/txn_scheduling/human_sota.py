"""Transaction scheduling, human state of the art: Shortest Makespan First (SMF, Cheng et al. 2024).

Greedy: repeatedly append the remaining transaction whose placement increases the
makespan least (ties: the one that can start earliest, then the shorter one), over
all remaining transactions. Restarted from the ``num_seqs`` shortest transactions;
the best order wins.
"""


def get_best_schedule(workload, num_seqs):
    """Return (makespan, order) found by SMF; see the module docstring."""
    txns = workload.txns
    starts = sorted(range(workload.num_txns), key=lambda i: len(txns[i]))[:max(1, num_seqs)]
    best_cost, best_order = None, None
    for first in starts:
        state = workload.new_state()
        state.place(txns[first])
        order, remaining = [first], [i for i in range(workload.num_txns) if i != first]
        while remaining:
            def key(j):
                txn = txns[remaining[j]]
                return state.cost_if_placed(txn), state.earliest_start(txn), len(txn)
            pick = min(range(len(remaining)), key=key)
            state.place(txns[remaining[pick]])
            order.append(remaining.pop(pick))
        if best_cost is None or state.makespan < best_cost:
            best_cost, best_order = state.makespan, order
    return best_cost, best_order

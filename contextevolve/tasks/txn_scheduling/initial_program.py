"""Transaction scheduling: order transactions so that the schedule finishes as early as possible."""

import random

# EVOLVE-BLOCK-START


def get_best_schedule(workload, num_seqs):
    """Return (makespan, order) for the transactions of ``workload``.

    Randomised greedy: ``num_seqs`` times, start from a random transaction and keep
    appending, out of a small random sample of the remaining transactions, the one that
    increases the makespan least. Keep the best order found.

    Args:
        workload: has ``txns`` (list of transactions, each a list of (op, key) with op "r"
            or "w", one operation per time step), ``num_txns``, ``makespan(order)`` and
            ``new_state()`` (incremental schedule with ``cost_if_placed(txn)``,
            ``place(txn)`` and ``.makespan``).
        num_seqs: number of randomised greedy restarts.

    Returns:
        (cost, order): the makespan and a permutation of range(workload.num_txns).
    """
    txns = workload.txns
    sample_size = 16
    best_cost, best_order = None, None
    for _ in range(num_seqs):
        remaining = list(range(workload.num_txns))
        random.shuffle(remaining)
        state = workload.new_state()
        order = [remaining.pop()]
        state.place(txns[order[0]])
        while remaining:
            # positions in `remaining` (not transaction ids) of a few random candidates
            positions = random.sample(range(len(remaining)), min(sample_size, len(remaining)))
            best_pos = min(positions, key=lambda pos: (state.cost_if_placed(txns[remaining[pos]]),
                                                       len(txns[remaining[pos]])))
            txn_id = remaining.pop(best_pos)
            state.place(txns[txn_id])
            order.append(txn_id)
        if best_cost is None or state.makespan < best_cost:
            best_cost, best_order = state.makespan, order
    return best_cost, best_order


# EVOLVE-BLOCK-END

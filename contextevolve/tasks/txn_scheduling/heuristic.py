"""Transaction scheduling heuristic baseline: first come, first served (the arrival order)."""


def get_best_schedule(workload, num_seqs):
    """Schedule the transactions in the order they arrived; ``num_seqs`` is unused."""
    order = list(range(workload.num_txns))
    return workload.makespan(order), order

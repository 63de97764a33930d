"""Seconds per evaluation of each task's initial program on this machine, excluding the data build.

Each task's data (workloads, tables, load traces, captured attention inputs) is built
or loaded once first (reported separately as "data"); then the initial program is
evaluated ``--repeats`` times through ``Task.evaluate`` — child process start, the
candidate's own work, result transfer and grading all included — and the median,
min and max wall-clock seconds are printed next to the issue's limit for the task.

Usage: python benchmarks/eval_time.py [--tasks NAME ...] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contextevolve.tasks.registry import get_task, task_names

LIMITS_S = {"model_placement": 1, "txn_scheduling": 3, "eplb": 10, "llm_sql": 20, "sparse_attention": 20}
"""Per-task evaluation time limits on a 2-core machine."""


def build_data(name: str) -> None:
    """Build or load the task's cached data so that it is not timed."""
    if name == "model_placement":
        from contextevolve.tasks.model_placement.cases import test_cases
        test_cases()
    elif name == "txn_scheduling":
        from contextevolve.tasks.txn_scheduling.workloads import workloads
        workloads()
    elif name == "llm_sql":
        from contextevolve.tasks.llm_sql.tables import tables
        tables()
    elif name == "eplb":
        from contextevolve.tasks.eplb.traces import load_windows
        load_windows()
    elif name == "sparse_attention":
        from contextevolve.tasks.sparse_attention.capture import attention_inputs
        attention_inputs()


def main() -> int:
    """Print each task's data-build seconds and its initial program's evaluation seconds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=task_names())
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{'task':18} {'data s':>8} {'median s':>9} {'min s':>7} {'max s':>7} {'limit s':>8}"
          "  status / score")
    worst_ratio = 0.0
    for name in args.tasks:
        task = get_task(name)
        start = time.perf_counter()
        build_data(name)
        data_s = time.perf_counter() - start
        times, result = [], None
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = task.evaluate(task.initial_program)
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        limit = LIMITS_S.get(name)
        if limit:
            worst_ratio = max(worst_ratio, median / limit)
        print(f"{name:18} {data_s:8.2f} {median:9.2f} {min(times):7.2f} {max(times):7.2f} "
              f"{limit if limit else '-':>8}  {result.status} {result.combined_score:.4f}", flush=True)
    print(f"worst median / limit ratio: {worst_ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

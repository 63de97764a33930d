"""Throughput of parallel evaluation and of parallel workers, measured in one run.

Part 1 — evaluations per minute with 1 vs 2 evaluation workers: ``--evals`` sandboxed evaluations of
the task's baseline programs (initial, heuristic, human SOTA, cycled) go through a
:class:`LocalExecutor` with 1 evaluation worker, then with 2; wall clock per batch, median of
``--repeats`` batches.

Part 2 — iterations per hour with workers = 1 vs 2 against the embedded LLM: two fresh runs
of ``--iterations`` iterations each (same seed), ``workers=W`` (evaluation workers and LLM requests
in flight follow: one per worker). Time is measured from the end of the first ``initialize`` (the
initial program evaluated and abstracted, the LLM server up) to the end of the run, so server
start-up is not counted.

Every figure is printed with the ratio 2/1. This machine is shared and noisy: compare the
ratios, not absolute values, and only between figures of the same run.

Usage: python benchmarks/parallelism.py [--task NAME] [--evals 16] [--repeats 3]
                                        [--llm-task NAME] [--iterations 4] [--skip-llm]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contextevolve.evaluation.executors import LocalExecutor
from contextevolve.tasks.registry import get_task


def evals_per_minute(task_name: str, workers: int, n: int, repeats: int) -> tuple[float, list[str]]:
    """Median evaluations per minute of ``n`` baseline programs with ``workers`` evaluation workers.

    Also the statuses of the last batch.
    """
    task = get_task(task_name)
    sources = list(itertools.islice(itertools.cycle(task.baselines().values()), n))
    executor = LocalExecutor(workers)
    executor.evaluate(task_name, sources[0])  # warm: task data built/loaded once, outside the timing
    rates, statuses = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        results = executor.map(task_name, sources)
        rates.append(60 * n / (time.perf_counter() - start))
        statuses = [r.status for r in results]
    return statistics.median(rates), statuses


def iterations_per_hour(task_name: str, workers: int, iterations: int,
                        seed: int) -> tuple[float, float, dict]:
    """Iterations per hour of a fresh embedded-LLM run with ``workers`` workers, its seconds and status."""
    from contextevolve.api import evolve, run_status

    marks: dict[str, float] = {}

    def on_update(node: str, _update: dict) -> None:
        if node == "initialize":  # every worker starts with it; the first to finish finds c_0 committed
            marks.setdefault("start", time.perf_counter())

    with tempfile.TemporaryDirectory(prefix=f"ce-bench-workers{workers}-") as tmp:
        # one server in both, so that only the workers differ (workers > 1 always share one server)
        evolve(task_name, iterations=iterations, run_dir=Path(tmp) / "run", workers=workers,
               embedded_server_per_role=False,
               seed=seed, on_update=on_update)
        seconds = time.perf_counter() - marks["start"]
        status = run_status(Path(tmp) / "run")
    return 3600 * iterations / seconds, seconds, status


def main() -> None:
    """Print evaluations per minute with 1 and 2 evaluation workers, then iterations per hour with 1 and 2."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="txn_scheduling", help="task for the evaluation-pool part")
    parser.add_argument("--evals", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--llm-task", default="model_placement", help="task for the workers part")
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-llm", action="store_true", help="only the evaluation-pool part")
    args = parser.parse_args()

    print(f"== evaluations per minute: {args.evals} evaluations of {args.task} baselines, "
          f"median of {args.repeats} batches")
    one, statuses = evals_per_minute(args.task, 1, args.evals, args.repeats)
    two, _ = evals_per_minute(args.task, 2, args.evals, args.repeats)
    print(f"statuses: {sorted(set(statuses))}")
    print(f"1 evaluation worker : {one:8.1f} evals/min")
    print(f"2 evaluation workers: {two:8.1f} evals/min")
    print(f"ratio 2/1: {two / one:8.2f}")
    if args.skip_llm:
        return
    print(f"\n== iterations per hour: {args.iterations} iterations of {args.llm_task}, embedded LLM, "
          f"seed {args.seed}")
    rows = {}
    for workers in (1, 2):
        rate, seconds, status = iterations_per_hour(args.llm_task, workers, args.iterations, args.seed)
        rows[workers] = rate
        print(f"workers={workers}: {rate:8.1f} iterations/hour ({args.iterations} iterations in "
              f"{seconds:.0f} s; statuses {status['statuses']}, best {status['best_score']:.4f}, "
              f"tokens {status['total_tokens']})", flush=True)
    print(f"ratio 2/1: {rows[2] / rows[1]:8.2f}")


if __name__ == "__main__":
    main()

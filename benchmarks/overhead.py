"""Framework overhead per iteration with 10, 100 and 1,000 programs in the Evolve Buffer.

"Overhead" is everything an iteration does except LLM calls and candidate evaluation:
parent selection, trajectory rollout, vector retrieval + MMR, context composition,
SQLite writes, the Chroma upsert (with its embedding), and LangGraph checkpointing.
LLM calls are replaced by instant scripted replies and the evaluator by a constant, so
what remains is measured. Prints the median seconds per iteration and per node.

Also prints the bytes of LangGraph checkpoints (and pending writes) stored per iteration; with
``--checkpoint-iterations 100 1000`` it runs that many iterations to show they stay flat as a run grows.

Usage: python benchmarks/overhead.py [--sizes 10 100 1000] [--iterations 7] [--checkpoint-iterations 100 1000]
"""

from __future__ import annotations

import argparse
import itertools
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from contextevolve.graph.builder import RECURSION_LIMIT, build_graph
from contextevolve.graph.context import RunContext
from contextevolve.llm.models import use_chat_models
from contextevolve.memory.records import ProgramRecord, program_id
from contextevolve.memory.store import close_memory, open_memory
from contextevolve.tasks.base import Evaluation
from contextevolve.tasks.registry import get_task

IDEAS = ["greedy by req_rate/slo", "sort by model size", "binary search on a KVPR threshold",
         "local search swapping pairs", "projected-pressure greedy", "round robin", "largest-first packing",
         "simulated annealing", "min-max bottleneck assignment", "two-phase balance then repair"]


def populate(run_dir: Path, n: int, source: str) -> None:
    """Commit ``n`` programs (c_0 and ``n - 1`` children), the abstracts indexed in batches.

    Each child's iteration is claimed first, as a run's worker claims it, so that the run's next claim is
    iteration ``n``.
    """
    memory = open_memory(run_dir)
    rng = random.Random(n)
    records = []
    for i in range(n):
        if i:
            assert memory.buffer.claim(0, n - 1) == i
        ok = i == 0 or rng.random() < 0.7
        score = 21.9 + rng.random() * 2 if ok else 0.0
        record = ProgramRecord(
            id=program_id(i), iteration=i, parent_id=None if i == 0 else program_id(rng.randrange(i)),
            source=source + f"\n# variant {i}\n", status="ok" if ok else rng.choice(["invalid", "failed"]),
            abstract=f"{rng.choice(IDEAS)} combined with {rng.choice(IDEAS)}; keeps {rng.choice(IDEAS)} "
                     f"from its parent (variant {i}).",
            metrics={"max_kvpr": score - 1 if ok else 0.0, "success_rate": 1.0 if ok else 0.0},
            combined_score=score, committed=True)
        memory.buffer.put(record)
        records.append(record)
    # stand-in embeddings (seeded unit vectors): embedding 10,000 abstracts takes the model an hour on two
    # cores, and an iteration's own retrieval (its query, embedded by the model) is what is measured
    vectors = np.random.default_rng(n).normal(size=(n, 384))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    memory.index.add_many(records, embeddings=vectors.tolist())


def instant_models(source: str) -> dict:
    """Scripted chat models by role that answer at once: the Generator a new copy of ``source`` each time."""
    counter = itertools.count()

    class Gen(GenericFakeChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            self.messages = iter([AIMessage(f"```python\n{source}\n# child {next(counter)}\n```")])
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    def fixed(text):
        return GenericFakeChatModel(messages=itertools.cycle([AIMessage(text)]))

    return {"summarizer": fixed("A projected-pressure greedy that keeps the parent's ordering."),
            "navigator": fixed("Explore balancing free memory against request load."),
            "sampler": fixed('{"exemplars": [1, 3]}'), "generator": Gen(messages=iter([]))}


def checkpoint_bytes(conn: sqlite3.Connection) -> int:
    """Bytes of every checkpoint, its metadata and every pending write LangGraph's SqliteSaver stored."""
    stored = conn.execute("SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM checkpoints")
    writes = conn.execute("SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes")
    return stored.fetchone()[0] + writes.fetchone()[0]


def measure(n: int, iterations: int) -> tuple[float, dict[str, float], float]:
    """Seconds per iteration and per node, and checkpoint bytes per iteration, on a buffer of ``n`` programs.

    The seconds are medians over ``iterations`` iterations; the bytes are what the run stored per iteration.
    """
    task = get_task("model_placement")
    source = task.initial_program
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        populate(run_dir, n, source)
        original = type(task).evaluate
        type(task).evaluate = lambda self, src, timeout_s=None: Evaluation(
            status="ok", metrics={"max_kvpr": 21.0, "success_rate": 1.0}, combined_score=22.0)
        conn = sqlite3.connect(run_dir / "checkpoints.sqlite", check_same_thread=False)
        try:
            graph = build_graph(SqliteSaver(conn))
            ctx = RunContext(run_dir=str(run_dir), max_iterations=n - 1 + iterations, max_retries=0)
            config = {"configurable": {"thread_id": "bench"}, "recursion_limit": RECURSION_LIMIT}
            per_iteration, per_node = [], {}
            with use_chat_models(**instant_models(source)):
                last = start = time.perf_counter()
                for chunk in graph.stream({}, config, context=ctx, stream_mode="updates"):
                    now = time.perf_counter()
                    for node in chunk:
                        per_node.setdefault(node, []).append(now - last)
                        if node == "update_buffer":
                            per_iteration.append(now - start)
                            start = now
                        elif node == "initialize":
                            start = now
                    last = now
            stored = checkpoint_bytes(conn) / iterations
        finally:
            conn.close()
            type(task).evaluate = original
            close_memory(run_dir)
    per_iteration = per_iteration[1:] or per_iteration  # first iteration warms caches
    return statistics.median(per_iteration), {k: statistics.median(v) for k, v in per_node.items()}, stored


def main() -> None:
    """Print the overhead per iteration for each buffer size (and the checkpoint bytes, if asked)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--iterations", type=int, default=7)
    parser.add_argument("--checkpoint-iterations", type=int, nargs="*", default=[],
                        help="also run this many iterations from 10 programs and print checkpoint bytes per "
                             "iteration")
    args = parser.parse_args()
    print(f"{'programs':>9} {'s/iteration':>12} {'ckpt B/it':>10}  per node (median ms)")
    for n in args.sizes:
        total, nodes, stored = measure(n, args.iterations)
        detail = ", ".join(f"{k} {v * 1000:.1f}" for k, v in nodes.items() if k != "initialize")
        print(f"{n:>9} {total:>12.3f} {stored:>10.0f}  {detail}", flush=True)
    for iterations in args.checkpoint_iterations:
        total, _, stored = measure(10, iterations)
        print(f"{iterations} iterations from 10 programs: {stored:.0f} checkpoint bytes per iteration "
              f"(median {total:.3f} s per iteration)", flush=True)


if __name__ == "__main__":
    main()

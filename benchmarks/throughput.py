"""Throughput against a fast endpoint: ContextEvolve's workers beside OpenEvolve's, in one run.

Each setting gets a fresh :class:`benchmarks.latency_endpoint.LatencyEndpoint` (``--streams`` requests at
once, ``--ttft`` seconds to the first token, ``--tpot`` seconds per token; the same seeded mix of replies)
and evolves ``--task`` for ``--iterations`` iterations (children): ContextEvolve in this process with W
workers (``--workers 1,2,4,8``; ``--samples-per-prompt N`` children per prompt), OpenEvolve 0.4.1 asking
for whole programs in its own process with N worker processes (``--openevolve 1,8``; its candidates are
scored by our sandboxed evaluator into a ledger, as in ``contextevolve compare``). Every figure is over the
same window for every system: from the endpoint's first request to its last reply (a process's start-up is
not counted).

Printed per setting: iterations/min (children evaluated), valid children/min (ok and new code; a twin is not
valid), speed-up in iterations/min over the same system with one worker, endpoint busy (busy stream-seconds /
(streams × wall)) and mean requests in flight (queued ones included).

Usage: python benchmarks/throughput.py [--iterations 24] [--per-worker 6] [--workers 1,2,4,8]
           [--openevolve 1,8] [--streams 8 --ttft 0.3 --tpot 0.025] [--task model_placement] [--seed 0]
           [--summarize-behind on|off|default] [--samples-per-prompt N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.latency_endpoint import LatencyEndpoint  # noqa: E402


def iterations_for(args: argparse.Namespace, workers: int) -> int:
    """Iterations with ``workers`` workers: ``--iterations``, or ``--per-worker`` × ``workers`` if more."""
    return max(args.iterations, args.per_worker * workers)


def run_contextevolve(args: argparse.Namespace, workers: int, folder: Path, behind: str) -> dict:
    """The figures of one ContextEvolve run with ``workers`` workers.

    ``behind`` puts the Summarizer behind the workers or not: ``on``, ``off``, or ``default`` (on with
    several workers).
    """
    from contextevolve.api import evolve
    from contextevolve.memory.buffer import EvolveBuffer

    endpoint = LatencyEndpoint(streams=args.streams, ttft_s=args.ttft, tpot_s=args.tpot, seed=args.seed)
    try:
        evolve(args.task, iterations=iterations_for(args, workers), run_dir=folder / "run", workers=workers,
               base_url=endpoint.url, model="ctx", models={"generator": "gen"}, api_key="none",
               max_retries=1, seed=args.seed, summarize_behind={"on": True, "off": False}.get(behind),
               **({"samples_per_prompt": args.samples_per_prompt} if args.samples_per_prompt else {}))
        figures = endpoint.figures()
    finally:
        endpoint.close()
    buffer = EvolveBuffer(folder / "run" / "buffer.sqlite")
    try:
        children = [r for r in buffer.committed() if r.iteration > 0]
    finally:
        buffer.close()
    label = {"on": ", Summarizer behind", "off": ", Summarizer in order"}.get(behind, "")
    return {"system": "ContextEvolve", "parallel": f"workers {workers}{label}", "n": workers,
            "iterations": len(children), "valid": sum(r.status == "ok" for r in children),
            "replies": dict(endpoint.kinds), **figures}


def run_openevolve(args: argparse.Namespace, workers: int, folder: Path, _behind: str = "") -> dict:
    """One OpenEvolve run (whole programs) with ``workers`` worker processes; its figures."""
    from contextevolve.compare import ledger
    from contextevolve.compare.peer_spec import PeerSpec
    from contextevolve.tasks.registry import get_task

    task = get_task(args.task)
    endpoint = LatencyEndpoint(streams=args.streams, ttft_s=args.ttft, tpot_s=args.tpot, seed=args.seed)
    ledger_path = folder / "ledger.jsonl"
    ledger.evaluate(task, task.initial_program, ledger_path, initial=True)
    spec = PeerSpec(system="openevolve", task=args.task, out_dir=str(folder / "run"), ledger=str(ledger_path),
                    base_url=endpoint.url, model="gen", candidates=iterations_for(args, workers),
                    seed=args.seed, workers=workers, options={"diff_based_evolution": False})
    (folder / "spec.json").write_text(spec.model_dump_json(indent=2))
    try:
        with open(folder / "system.log", "w") as log:
            subprocess.run([sys.executable, "-m", "contextevolve.compare.peers", str(folder / "spec.json")],
                           stdout=log, stderr=subprocess.STDOUT, cwd=folder, check=False, timeout=3600)
        figures = endpoint.figures()
    finally:
        endpoint.close()
    entries = [json.loads(line) for line in ledger_path.read_text().splitlines() if line.strip()]
    candidates = [e for e in entries if e.get("candidate", True) and e["index"] > 0]
    return {"system": "OpenEvolve 0.4.1 (whole programs)",
            "parallel": f"{workers} worker{'s' * (workers > 1)}", "n": workers, "iterations": len(candidates),
            "valid": sum(e["status"] == "ok" and e.get("changed") for e in candidates),
            "replies": dict(endpoint.kinds), **figures}


def per_minute(row: dict) -> dict:
    """``row`` with its per-minute figures over the endpoint's window (first request to last reply)."""
    minutes = max(row["wall_s"], 1e-9) / 60
    return {**row, "iterations_per_min": row["iterations"] / minutes, "valid_per_min": row["valid"] / minutes}


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table, speed-up against the same system's one-worker row."""
    base = {}
    for r in rows:
        if r["n"] == 1:
            base.setdefault(r["system"], r["iterations_per_min"])
    lines = ["| system | parallel | iterations/min | valid children/min | speed-up over 1 | endpoint busy | "
             "mean requests in flight | iterations | wall s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        speed = f"{r['iterations_per_min'] / base[r['system']]:.1f}×" if r["system"] in base else "–"
        lines.append(f"| {r['system']} | {r['parallel']} | {r['iterations_per_min']:.2f} | "
                     f"{r['valid_per_min']:.2f} | {speed} | {r['busy']:.0%} | {r['in_flight']:.2f} | "
                     f"{r['iterations']} | {r['wall_s']:.0f} |")
    return "\n".join(lines)


def main() -> int:
    """Run every setting against its own latency endpoint and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=24, help="iterations per setting (at least)")
    parser.add_argument("--per-worker", type=int, default=0,
                        help="at least this many iterations per worker (a setting with many workers runs "
                             "longer, so that its first and last iterations, when workers wait for c_0 or "
                             "have no claim left, weigh as little as with one)")
    parser.add_argument("--workers", default="1,2,4,8",
                        help="ContextEvolve worker counts, comma-separated; W:on or W:off sets the "
                             "Summarizer behind the workers for that row (default: --summarize-behind)")
    parser.add_argument("--openevolve", default="1,8", help="OpenEvolve worker counts ('' for none)")
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--ttft", type=float, default=0.3)
    parser.add_argument("--tpot", type=float, default=0.025)
    parser.add_argument("--task", default="model_placement")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--summarize-behind", choices=["on", "off", "default"], default="default",
                        help="ContextEvolve's Summarizer behind its worker (default: on with several "
                             "workers)")
    parser.add_argument("--samples-per-prompt", type=int, default=0,
                        help="ContextEvolve's children per prompt (default: the run's default)")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    settings = [("contextevolve", int(w.partition(":")[0]), w.partition(":")[2] or args.summarize_behind)
                for w in args.workers.split(",") if w.strip()]
    settings += [("openevolve", int(w), "") for w in args.openevolve.split(",") if w.strip()]
    print(f"throughput: {args.task}, {args.iterations} iterations per setting (at least "
          f"{args.per_worker} per worker), endpoint {args.streams} streams, "
          f"{args.ttft} s to the first token, {args.tpot * 1000:.0f} ms per token", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ce-throughput-") as tmp:
        for n, (system, workers, behind) in enumerate(settings):
            folder = Path(tmp) / f"{n}-{system}-{workers}"
            folder.mkdir()
            began = time.perf_counter()
            run = run_contextevolve if system == "contextevolve" else run_openevolve
            row = per_minute(run(args, workers, folder, behind))
            rows.append(row)
            print(f"{row['system']}, {row['parallel']}: {row['iterations_per_min']:.2f} iterations/min, "
                  f"{row['valid_per_min']:.2f} valid/min, busy {row['busy']:.0%}, "
                  f"in flight {row['in_flight']:.2f} ({row['iterations']} iterations, "
                  f"{time.perf_counter() - began:.0f} s; replies {row['replies']})", flush=True)
    print()
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

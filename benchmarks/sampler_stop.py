"""What cutting the Sampler's reply where its list of picks closes saves: a paired replay of stored requests.

Takes the Sampler requests of runs recorded with ``--log-prompts`` (``RUN_DIR/prompts.jsonl``, first attempts)
and sends each twice, with the same seed and the run's Sampler settings (JSON mode, temperature, cap):
``whole``, as runs sent them before (the reply goes on with its "why" until the cap), and ``cut``, with the
stop sequence runs send now (``contextevolve.nodes.sample.STOP_AFTER_PICKS``). The two alternate request by
request, so a noisy machine slows them alike. Both replies are parsed as a run parses them
(``nodes.sample.parse_choice``): the picks should agree, since the cut only drops what follows them.

Prints per form: requests, completion tokens and seconds (sums and per request), and how many pairs chose
the same exemplars; writes every pair to ``--out`` (JSON).

Usage:
    python benchmarks/sampler_stop.py RUN_DIR [RUN_DIR ...] [--limit N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.messages import convert_to_messages

from benchmarks import replay
from contextevolve.graph.context import RunContext
from contextevolve.llm import transcript
from contextevolve.llm.calls import call_role
from contextevolve.nodes.sample import STOP_AFTER_PICKS, parse_choice


def sampler_requests(run_dir: Path) -> list[dict]:
    """The first-attempt Sampler requests of a run, with the number of candidates each listed.

    Raises:
        FileNotFoundError: the run has no transcript (it was not recorded with ``--log-prompts``).
    """
    requests = []
    for row in transcript.read(run_dir):
        if row["role"] == "sampler" and row["attempt"] == 1:
            user = row["messages"][-1]["content"]
            k = int(re.search(r"Choose the (\d+) candidates", user).group(1))
            n = len(re.findall(r"^\[\d+\] status=", user, flags=re.MULTILINE))
            requests.append({"run": run_dir.name, "messages": row["messages"], "k": k, "candidates": n})
    return requests


def ask(messages: list, seed: int, stop: list[str] | None) -> dict:
    """One Sampler request as a run sends it (``call_role``: JSON mode, a reply cut at the cap kept).

    It goes to the embedded model or the endpoint the environment names, after
    :func:`~benchmarks.replay.flush`.
    """
    replay.flush("sampler")
    start = time.perf_counter()
    reply = call_role("sampler", messages, RunContext(seed=seed, max_retries=0), json_mode=True, stop=stop)
    return {"seconds": time.perf_counter() - start, "text": reply.text,
            "completion": reply.usage.get("sampler", {}).get("completion", 0)}


def main() -> int:
    """Send every stored Sampler request with and without the stop, and print the paired figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--limit", type=int, help="first N Sampler requests of each run")
    parser.add_argument("--out", type=Path, default=Path("runs/sampler_stop.json"))
    args = parser.parse_args()
    try:
        runs = {run_dir: sampler_requests(run_dir)[:args.limit] for run_dir in args.runs}
    except FileNotFoundError as exc:
        parser.error(str(exc))
    pairs = []
    for run_dir, requests in runs.items():
        for n, request in enumerate(requests):
            messages = convert_to_messages(request["messages"])
            pair = {"run": request["run"], "n": n}
            for form, stop in (("whole", None), ("cut", STOP_AFTER_PICKS)):
                pair[form] = ask(messages, seed=n, stop=stop)
                pair[form]["picks"] = parse_choice(pair[form]["text"], request["candidates"], request["k"])
            pairs.append(pair)
            whole, cut = pair["whole"], pair["cut"]
            print(f"{pair['run']} #{n}: whole {whole['picks']} {whole['completion']} tokens "
                  f"{whole['seconds']:.1f} s | cut {cut['picks']} {cut['completion']} tokens "
                  f"{cut['seconds']:.1f} s {cut['text']!r}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(pairs, indent=2))
    print("\n| form | requests | completion tokens / request | s / request (median) | s in all |")
    print("|---|---|---|---|---|")
    for form in ("whole", "cut"):
        seconds = [p[form]["seconds"] for p in pairs]
        tokens = [p[form]["completion"] for p in pairs]
        median = statistics.median(seconds) if seconds else 0
        print(f"| {form} | {len(pairs)} | {sum(tokens) / max(len(pairs), 1):.0f} | "
              f"{sum(seconds) / max(len(pairs), 1):.1f} ({median:.1f}) | {sum(seconds):.0f} |")
    same = sum(p["whole"]["picks"] == p["cut"]["picks"] for p in pairs)
    print(f"same picks in {same} of {len(pairs)} pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())

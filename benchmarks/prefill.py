"""What the embedded server's prompt cache saves in prompt reading: a replay of stored requests.

Reads the requests of runs recorded with ``--log-prompts`` (``RUN_DIR/prompts.jsonl``: every role's,
in the order the run sent them) and sends them again, in that order, to the embedded server once per
cache size (``--cache-mb``, 0 = no cache), each with a one-token reply: what is timed is reading the
prompt (prefill), which is where a run's requests differ from each other's beginnings. The messages are
byte for byte the stored ones, so the cache changes only how much of each prompt the server reads
again, never what the model sees.

llama.cpp's server always reuses the prefix a request shares with the request just before it; with a
cache (llama-cpp-python's RAM prompt cache, ``CONTEXTEVOLVE_PROMPT_CACHE_MB``) it also restores the
state of an earlier request that shares a longer prefix: the Navigator's growing history, the
Generator's parent section asked about again after a Summarizer or Navigator call came between.

Prints per cache size and role: requests, prompt tokens, seconds (sum), and the server's peak resident
memory (``VmHWM``: each cached prompt keeps a ~311 MB logits copy besides its KV state, see
``contextevolve/llm/embedded.py``); writes every request's seconds to ``--out`` (JSON).

Also compares llama.cpp builds: it prints the build's CPU features and the prompt tokens read per
second, and the server runs whichever ``llama_cpp`` comes first on ``PYTHONPATH``.

Usage:
    python benchmarks/prefill.py RUN_DIR [RUN_DIR ...] [--cache-mb 0,100] [--limit N] [--out FILE]
    PYTHONPATH=/path/to/other/build python benchmarks/prefill.py RUN_DIR --cache-mb 0 --limit 16
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from openai import OpenAI  # noqa: E402

from contextevolve.llm import embedded, transcript  # noqa: E402

ROLES = {"system": "system", "human": "user", "ai": "assistant"}


def stored_requests(run_dir: Path, limit: int | None = None) -> list[dict]:
    """The requests of ``run_dir/prompts.jsonl`` in the order sent: ``{"run", "role", "messages"}``
    with OpenAI-style messages (``role``/``content``).

    Raises:
        SystemExit: the run has no ``prompts.jsonl`` (it was not recorded with ``--log-prompts``).
    """
    try:
        rows = transcript.read(run_dir, limit)
    except FileNotFoundError as exc:
        raise SystemExit(str(exc)) from None
    requests = []
    for row in rows:
        messages = [{"role": ROLES[m["type"]], "content": m["content"]} for m in row["messages"]]
        requests.append({"run": run_dir.name, "role": row["role"], "messages": messages})
    return requests


def peak_rss_mb(pid: int) -> float:
    """Peak resident memory of process ``pid`` in MB (``VmHWM`` of ``/proc/PID/status``); 0 if unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def replay(requests: list[dict], cache_mb: int) -> dict:
    """Send ``requests`` in order to a fresh embedded server with a ``cache_mb`` prompt cache.

    Returns ``{"cache_mb", "peak_rss_mb", "rows": [{"run", "role", "prompt_tokens", "seconds"}]}``.
    """
    os.environ["CONTEXTEVOLVE_PROMPT_CACHE_MB"] = str(cache_mb)
    rows = []
    with embedded.EmbeddedServer() as server:
        client = OpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=600)
        for request in requests:
            start = time.perf_counter()
            reply = client.chat.completions.create(model=embedded.MODEL_ALIAS, messages=request["messages"],
                                                   max_tokens=1, temperature=0.0, seed=0)
            seconds = time.perf_counter() - start
            rows.append({"run": request["run"], "role": request["role"],
                         "prompt_tokens": reply.usage.prompt_tokens, "seconds": seconds})
            print(f"cache {cache_mb:>4} MB {request['run']} {request['role']:>10}: "
                  f"{reply.usage.prompt_tokens:>5} prompt tokens, {seconds:5.1f} s", flush=True)
        peak = peak_rss_mb(server.pid)
    return {"cache_mb": cache_mb, "peak_rss_mb": peak, "rows": rows}


def table(results: list[dict]) -> str:
    """Markdown: seconds by role per cache size, and the saving against the first size given."""
    roles = sorted({row["role"] for row in results[0]["rows"]})
    base = results[0]
    lines = ["| cache MB | peak RSS MB | " + " | ".join(roles) + " | all | saved |",
             "|---|---|" + "---|" * (len(roles) + 2)]
    base_total = sum(r["seconds"] for r in base["rows"])
    for result in results:
        cells = []
        for role in roles:
            mine = [r for r in result["rows"] if r["role"] == role]
            cells.append(f"{len(mine)}× {sum(r['seconds'] for r in mine):.0f} s")
        total = sum(r["seconds"] for r in result["rows"])
        lines.append(f"| {result['cache_mb']} | {result['peak_rss_mb']:.0f} | " + " | ".join(cells)
                     + f" | {total:.0f} s | {100 * (1 - total / base_total):.0f} % |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--cache-mb", default="0,100", help="comma-separated cache caps in MB (0: none)")
    parser.add_argument("--limit", type=int, help="first N requests of each run")
    parser.add_argument("--out", type=Path, default=Path("runs/prefill.json"))
    args = parser.parse_args()
    try:
        sizes = [int(size) for size in args.cache_mb.split(",")]
    except ValueError:
        parser.error(f"--cache-mb must be comma-separated whole numbers, not {args.cache_mb!r}")
    requests = [request for run in args.runs for request in stored_requests(run, args.limit)]
    if not requests:
        parser.error("no stored requests to replay (empty prompts.jsonl, or --limit 0)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    print("llama.cpp build:", embedded.build_features(), flush=True)  # PYTHONPATH picks another build
    results = []
    for size in sizes:  # written after each size, so a failed replay keeps the sizes before it
        results.append(replay(requests, size))
        args.out.write_text(json.dumps(results, indent=2))
    print(table(results))
    for result in results:
        tokens = sum(r["prompt_tokens"] for r in result["rows"])
        seconds = sum(r["seconds"] for r in result["rows"])
        note = "" if result["cache_mb"] == 0 else " (cached prefixes are not read again: not a reading speed)"
        print(f"cache {result['cache_mb']} MB: {tokens} prompt tokens in {seconds:.0f} s = "
              f"{tokens / seconds:.0f} prompt tokens/s{note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What a prompt cache, a server per agent or only the last token's logits save in prompt reading: a replay.

It measures the embedded server's prompt cache, one server per agent, and keeping only the last token's logits
on stored requests.

Reads the requests of runs recorded with ``--log-prompts`` (``RUN_DIR/prompts.jsonl``: every role's,
in the order the run sent them) and sends them again, in that order, to fresh embedded servers once per
cache size (``--cache-mb``, 0 = no cache) and server layout (``--layouts``: ``shared``, one server for
every agent; ``per_role``, each request to its agent's server as a default run has them: the Navigator's,
the Generator's, and one the others share, ``contextevolve.llm.models.embedded_server_key``) and logits
setting (``--logits``: ``last``, the servers as a run starts them; ``all``, llama-cpp-python's default of
computing and keeping every prompt token's logits, ``contextevolve.llm.server_flags.LOGITS_ALL``), each with
a one-token reply: what is timed is reading the prompt (prefill), which is where a run's requests differ
from each other's beginnings. The messages are byte for byte the stored ones, so neither the cache nor
the layout changes what the model sees, only how much of each prompt a server reads again (and the
logits setting, how much work reading a token takes).

llama.cpp's server always reuses the prefix a request shares with the request just before it; with a
cache (llama-cpp-python's RAM prompt cache, ``CONTEXTEVOLVE_PROMPT_CACHE_MB``) it also restores the
state of an earlier request that shares a longer prefix: the Navigator's growing history, the
Generator's parent section asked about again after a Summarizer or Navigator call came between.

Prints per cache size, layout, logits setting and role: requests, prompt tokens, seconds (sum), and the
servers' memory: the sum of their peak resident sets (``VmHWM``, which counts the shared model mapping
once per server) and of their anonymous memory at the end (``RssAnon``: what each server adds; each cached
prompt keeps a logits copy of up to 311 MB besides its KV state, see ``contextevolve/llm/embedded.py``);
writes every request's seconds to ``--out`` (JSON).

Also compares llama.cpp builds: it prints the build's CPU features and the prompt tokens read per
second, and the server runs whichever ``llama_cpp`` comes first on ``PYTHONPATH``.

Usage:
    python benchmarks/prefill.py RUN_DIR [RUN_DIR ...] [--cache-mb 0,100] [--layouts shared,per_role]
        [--logits last,all] [--limit N] [--out FILE]
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

from openai import OpenAI

from contextevolve.graph.context import RunContext
from contextevolve.llm import embedded, models, transcript

ROLES = {"system": "system", "human": "user", "ai": "assistant"}


def stored_requests(run_dir: Path, limit: int | None = None) -> list[dict]:
    """The requests of ``run_dir/prompts.jsonl`` in the order sent.

    Each is ``{"run", "role", "messages"}`` with OpenAI-style messages (``role``/``content``).

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


def memory_mb(pid: int) -> dict[str, float]:
    """``{"peak_rss_mb", "anon_mb"}`` of process ``pid``, in MB; 0 where unknown.

    They are ``VmHWM`` and ``RssAnon`` of ``/proc/PID/status``.
    """
    fields = {"VmHWM:": "peak_rss_mb", "RssAnon:": "anon_mb"}
    found = dict.fromkeys(fields.values(), 0.0)
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name = line.split(maxsplit=1)[0] if line else ""
            if name in fields:
                found[fields[name]] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return found


LAYOUTS = ("shared", "per_role")
"""Server layouts a replay can use: one server for every agent, or a default run's servers."""

LOGITS_SETTINGS = {"last": "0", "all": "1"}
"""Logits settings a replay can use, as ``CONTEXTEVOLVE_LOGITS_ALL`` values: only the last token's (what
a run's servers keep) or every prompt token's (llama-cpp-python's default)."""


def replay(requests: list[dict], cache_mb: int, layout: str = "shared", logits: str = "last") -> dict:
    """Send ``requests`` in order to fresh embedded servers with a ``cache_mb`` prompt cache.

    The servers are one for all (``layout="shared"``) or a default run's (``"per_role"``, each request to
    its role's server, :func:`contextevolve.llm.models.embedded_server_key`), keeping the ``logits`` of the
    last token (``"last"``) or of every token (``"all"``).

    Returns ``{"cache_mb", "layout", "logits", "peak_rss_mb", "anon_mb", "rows": [{"run", "role",
    "prompt_tokens", "seconds"}]}``; the memory figures are sums over the servers. The servers read
    their settings from ``CONTEXTEVOLVE_PROMPT_CACHE_MB`` and ``CONTEXTEVOLVE_LOGITS_ALL``, which are set
    while they are launched and restored afterwards; they are llama-cpp-python's servers
    (``CONTEXTEVOLVE_LLAMA_SERVER=python``), whose settings these are.
    """
    run = RunContext(embedded_server_per_role=layout == "per_role")
    key_of = {role: models.embedded_server_key(role, run) for role in {r["role"] for r in requests}}
    servers = {key: embedded.EmbeddedServer() for key in sorted(set(key_of.values()))}
    rows, memory = [], {"peak_rss_mb": 0.0, "anon_mb": 0.0}
    settings = {"CONTEXTEVOLVE_PROMPT_CACHE_MB": str(cache_mb),
                "CONTEXTEVOLVE_LOGITS_ALL": LOGITS_SETTINGS[logits], "CONTEXTEVOLVE_LLAMA_SERVER": "python"}
    before = {name: os.environ.get(name) for name in settings}
    try:
        os.environ.update(settings)
        try:
            for server in servers.values():  # launched together, then waited for, as a run starts them
                server.launch()
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        clients = {key: OpenAI(base_url=server.wait_ready(), api_key="none", max_retries=0, timeout=600)
                   for key, server in servers.items()}
        for request in requests:
            client = clients[key_of[request["role"]]]
            start = time.perf_counter()
            reply = client.chat.completions.create(model=embedded.MODEL_ALIAS, messages=request["messages"],
                                                   max_tokens=1, temperature=0.0, seed=0)
            seconds = time.perf_counter() - start
            rows.append({"run": request["run"], "role": request["role"],
                         "prompt_tokens": reply.usage.prompt_tokens, "seconds": seconds})
            print(f"cache {cache_mb:>4} MB {layout:>8} logits {logits:>4} {request['run']} "
                  f"{request['role']:>10}: {reply.usage.prompt_tokens:>5} prompt tokens, {seconds:5.1f} s",
                  flush=True)
        for server in servers.values():
            for name, value in memory_mb(server.pid).items():
                memory[name] += value
    finally:
        for server in servers.values():
            server.stop()
    return {"cache_mb": cache_mb, "layout": layout, "logits": logits, **memory, "rows": rows}


def table(results: list[dict]) -> str:
    """Markdown: seconds by role per cache size, layout and logits setting; the saving against the first."""
    roles = sorted({row["role"] for row in results[0]["rows"]})
    base = results[0]
    lines = ["| cache MB | layout | logits | peak RSS MB (sum) | anonymous MB (sum) | " + " | ".join(roles)
             + " | all | saved |", "|---|---|---|---|---|" + "---|" * (len(roles) + 2)]
    base_total = sum(r["seconds"] for r in base["rows"])
    for result in results:
        cells = []
        for role in roles:
            mine = [r for r in result["rows"] if r["role"] == role]
            cells.append(f"{len(mine)}× {sum(r['seconds'] for r in mine):.0f} s")
        total = sum(r["seconds"] for r in result["rows"])
        lines.append(f"| {result['cache_mb']} | {result.get('layout', 'shared')} | "
                     f"{result.get('logits', 'all')} | {result['peak_rss_mb']:.0f} | "
                     f"{result.get('anon_mb', 0):.0f} | " + " | ".join(cells)
                     + f" | {total:.0f} s | {100 * (1 - total / base_total):.0f} % |")
    return "\n".join(lines)


def main() -> int:
    """Replay the stored requests under each cache size, layout and logits setting asked; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--cache-mb", default="0,100", help="comma-separated cache caps in MB (0: none)")
    parser.add_argument("--layouts", default="shared",
                        help=f"comma-separated server layouts to replay with ({', '.join(LAYOUTS)})")
    parser.add_argument("--logits", default="last",
                        help=f"comma-separated logits settings to replay with ({', '.join(LOGITS_SETTINGS)})")
    parser.add_argument("--limit", type=int, help="first N requests of each run")
    parser.add_argument("--out", type=Path, default=Path("runs/prefill.json"))
    args = parser.parse_args()
    try:
        sizes = [int(size) for size in args.cache_mb.split(",")]
    except ValueError:
        parser.error(f"--cache-mb must be comma-separated whole numbers, not {args.cache_mb!r}")
    layouts = args.layouts.split(",")
    if not set(layouts) <= set(LAYOUTS):
        parser.error(f"--layouts must be comma-separated names among {', '.join(LAYOUTS)}, "
                     f"not {args.layouts!r}")
    logits = args.logits.split(",")
    if not set(logits) <= set(LOGITS_SETTINGS):
        parser.error(f"--logits must be comma-separated names among {', '.join(LOGITS_SETTINGS)}, "
                     f"not {args.logits!r}")
    requests = [request for run in args.runs for request in stored_requests(run, args.limit)]
    if not requests:
        parser.error("no stored requests to replay (empty prompts.jsonl, or --limit 0)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    print("llama.cpp build:", embedded.build_features(), flush=True)  # PYTHONPATH picks another build
    results = []
    for size in sizes:  # written after each replay, so a failed one keeps those before it
        for layout in layouts:
            for setting in logits:
                results.append(replay(requests, size, layout, setting))
                args.out.write_text(json.dumps(results, indent=2))
    print(table(results))
    for result in results:
        tokens = sum(r["prompt_tokens"] for r in result["rows"])
        seconds = sum(r["seconds"] for r in result["rows"])
        reused = result["cache_mb"] or result["layout"] != "shared"
        note = " (reused prefixes are not read again: not a reading speed)" if reused else ""
        print(f"cache {result['cache_mb']} MB, {result['layout']}, logits {result['logits']}: "
              f"{tokens} prompt tokens in {seconds:.0f} s = {tokens / seconds:.0f} prompt tokens/s{note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

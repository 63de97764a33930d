"""Several replies to one Generator ask: one request with ``n`` choices against ``n`` requests of one.

A run asks the Generator for one child per request, so every child pays for the whole prompt. An
OpenAI-compatible endpoint can return ``n`` choices for one request: the prompt is read and billed once. This
replays stored first asks (``RUN_DIR/prompts.jsonl`` of runs recorded with ``--log-prompts``) against the
embedded llama.cpp server, started here with ``n`` slots (its limit on choices per request), both ways, with
the same temperature and seeds, alternating ask by ask so a noisy machine slows both alike, and without the
server's reuse of a prompt read before (``cache_prompt`` off: a run's asks are different prompts):

* ``n x 1``: ``n`` requests of one choice each, seeds ``s .. s + n - 1`` (what a run sends for ``n``
  children);
* ``1 x n``: one request with ``n`` choices, seed ``s``.

Prints per arm: requests, replies, distinct replies, prompt tokens, completion tokens (each reply's counted
with the server's ``/tokenize``, beside what the endpoint reported: for ``1 x n`` llama.cpp's server reports
one choice's), seconds, and tokens and seconds per reply. No reply is judged (``sampling.py`` judges
replies; here only their cost differs).

Usage:
    python benchmarks/replies_per_ask.py RUN_DIR [RUN_DIR ...] [--n 3] [--limit 4] [--max-tokens 700]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.messages import convert_to_messages, convert_to_openai_messages

from contextevolve.llm import transcript


def first_asks(run_dirs: list[Path], limit: int | None = None) -> list[list[dict]]:
    """The stored first asks of the Generator (attempt 1), each once.

    A row that carries its request (``row["request"]``, written since requests are data) is a first ask when
    its kind is ``first``, and the rows of one request's choices count once; an older row is one when it holds
    a ``## Direction`` or reference programs. Each as OpenAI chat messages; at most ``limit`` over all runs,
    in the runs' order.

    Raises:
        FileNotFoundError: a run has no transcript (it was not recorded with ``--log-prompts``).
    """
    asks, last = [], None
    for run_dir in run_dirs:
        for row in transcript.read(run_dir):
            user = row["messages"][-1]["content"] if row["messages"] else ""
            if row["role"] != "generator" or row["attempt"] != 1:
                continue
            if "request" in row:
                same = (row["request"], row["messages"]) == last
                last = (row["request"], row["messages"])
                if row["request"]["kind"] != "first" or same:
                    continue
            elif "## Direction" not in user and "## Reference programs" not in user:
                continue
            asks.append(convert_to_openai_messages(convert_to_messages(row["messages"])))
    return asks[:limit] if limit is not None else asks


def summary(arm: str, rows: list[dict]) -> str:
    """One printed line of an arm's sums (``rows``: one dict per request, as :func:`main` records them)."""
    replies = sum(len(r["texts"]) for r in rows)
    prompt = sum(r["prompt"] for r in rows)
    counted = sum(r["counted"] for r in rows)
    reported = sum(r["reported"] for r in rows)
    seconds = sum(r["seconds"] for r in rows)
    per_reply = max(replies, 1)
    distinct = sum(len(set(r["texts"])) for r in rows)
    return (f"{arm:6} requests {len(rows):3}  replies {replies:3} (distinct within an ask {distinct:3})  "
            f"prompt {prompt:6}  completion {counted:6} (reported {reported:6})  {seconds:7.1f} s  "
            f"per reply: {(prompt + counted) / per_reply:6.0f} tokens, {seconds / per_reply:5.1f} s")


def main(argv: list[str] | None = None) -> int:
    """Replay the asks both ways and print the two arms' lines; exit 2 naming the problem on bad input."""
    import httpx

    from contextevolve.llm.embedded import EmbeddedServer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories recorded with --log-prompts")
    parser.add_argument("--n", type=int, default=3, help="replies per ask (default 3)")
    parser.add_argument("--limit", type=int, default=4, help="asks replayed (default 4)")
    parser.add_argument("--max-tokens", type=int, default=700, help="completion cap per reply")
    parser.add_argument("--temperature", type=float, default=0.8)
    args = parser.parse_args(argv)
    if args.n < 2:
        print("replies_per_ask: --n must be at least 2", file=sys.stderr)
        return 2
    try:
        asks = first_asks(args.runs, args.limit)
    except FileNotFoundError as exc:
        print(f"replies_per_ask: {exc}", file=sys.stderr)
        return 2
    if not asks:
        print("replies_per_ask: the runs hold no stored first ask of the Generator", file=sys.stderr)
        return 2
    server = EmbeddedServer(slots=args.n)
    base = server.start().rstrip("/")
    arms: dict[str, list[dict]] = {"n x 1": [], "1 x n": []}

    def send(messages: list[dict], seed: int, n: int) -> dict:
        body = {"model": "embedded", "messages": messages, "max_tokens": args.max_tokens,
                "temperature": args.temperature, "seed": seed, "n": n,
                "cache_prompt": False}  # every request reads its prompt, as each of a run's asks does
        started = time.perf_counter()
        reply = httpx.post(f"{base}/chat/completions", json=body, timeout=1800).json()
        seconds = time.perf_counter() - started
        texts = [c["message"]["content"] or "" for c in reply["choices"]]
        counted = sum(len(httpx.post(f"{base.removesuffix('/v1')}/tokenize", json={"content": t},
                                     timeout=60).json()["tokens"]) for t in texts)
        return {"texts": texts, "prompt": reply["usage"]["prompt_tokens"], "seconds": seconds,
                "reported": reply["usage"]["completion_tokens"], "counted": counted}

    try:
        for k, messages in enumerate(asks):
            seed = 1000 * k
            order = ("n x 1", "1 x n") if k % 2 == 0 else ("1 x n", "n x 1")
            for arm in order:
                if arm == "1 x n":
                    arms[arm].append(send(messages, seed, args.n))
                else:
                    singles = [send(messages, seed + j, 1) for j in range(args.n)]
                    arms[arm].append({"texts": [t for s in singles for t in s["texts"]],
                                      **{key: sum(s[key] for s in singles)
                                         for key in ("prompt", "seconds", "reported", "counted")}})
            print(f"ask {k + 1} of {len(asks)} done", file=sys.stderr)
    finally:
        server.stop()
    print(f"{len(asks)} asks, {args.n} replies each, temperature {args.temperature}")
    for arm, rows in arms.items():
        print(summary(arm, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

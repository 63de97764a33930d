"""What the Summarizer's prompt and cap cost and give: a paired replay of stored Summarizer requests.

Takes the first-attempt Summarizer requests of runs recorded with ``--log-prompts``
(``RUN_DIR/prompts.jsonl``) and asks the model again under each configuration with the same seed per
request; the configurations alternate request by request, so a noisy machine slows them alike. Each reply
becomes an abstract as a run makes it (``nodes.summarize.finish_abstract``: the parent's sentences it repeats
dropped, clipped at its last whole sentence).

A configuration is ``NAME=`` (the stored request, byte for byte, with today's cap) or ``NAME=key=value,...``:

* ``prompt``: ``stored`` (default) or ``current``: the request rendered again from its parts (task title,
  parent abstract, program, feedback) by today's :func:`contextevolve.prompts.summarizer.messages`, which
  measures a change to the prompt against the runs recorded before it;
* ``nodoc``: 1 shows the program without its docstrings (:func:`program.docstrings.without_docstrings`). A run
  now always does (``nodes.summarize.abstract_for``), so ``prompt=current,nodoc=1`` is what a run sends
  today; in transcripts recorded since then the programs have no docstrings left to drop;
* ``cap``: the completion-token cap (default: today's ``DEFAULT_MAX_TOKENS["summarizer"]``).

A request stored by a run that showed the Summarizer a child's changed lines (a setting since deleted,
docs/decisions/summarizer-abstracts.md) is still read; ``prompt=current`` renders it without them.

Prints per configuration: requests, prompt and completion tokens and seconds per request, replies cut at the
cap, replies that began with the parent's abstract (their first sentence is one of the parent abstract's),
abstracts whose "Changed:" sentence is the parent abstract's word for word (a child described as its
parent), those whose "Changed:" sentence names a word of the lines the child put in that its parent's code
lacks (:func:`names_a_change`), words per abstract, and replies the endpoint garbled (empty or unreadable:
counted, not timed); writes every reply to ``--out`` (JSON) as it comes.

Usage:
    python benchmarks/summarizer_replay.py RUN_DIR [RUN_DIR ...] --config old= --config new=prompt=current
        [--limit N] [--parents-only] [--out FILE]
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

from langchain_core.messages import HumanMessage, convert_to_messages

from benchmarks import replay
from contextevolve.graph.context import RunContext
from contextevolve.graph.settings import DEFAULT_MAX_TOKENS
from contextevolve.llm import transcript
from contextevolve.llm.calls import MalformedReply, call_role
from contextevolve.llm.parsing import sentences
from contextevolve.nodes.summarize import changed_sentence, finish_abstract
from contextevolve.program.changes import changed_lines
from contextevolve.program.docstrings import without_docstrings
from contextevolve.prompts import summarizer

KEYS = {"prompt": str, "nodoc": int, "cap": int}
PROMPTS = ("stored", "current")
REQUEST = re.compile(
    r"Task: (?P<title>.*?)\.\n\n(?:Parent abstract: (?P<parent>.*?)\n\nNew program:|Program:)\n```python\n"
    r"(?P<code>.*?)```\n\n(?:Lines it changed[^\n]*\n.*?\n\n)?"
    r"(?:Evaluator's feedback on it:\n(?P<feedback>.*?)\n\n)?(?P<instruction>[^\n]*)\Z",
    re.S)
"""The parts of a stored Summarizer request (the layout of ``prompts.summarizer.messages``, or of an older
run's request that showed the child's changed lines after its code)."""


def parse_config(text: str) -> tuple[str, dict]:
    """``"new=prompt=current,cap=120"`` -> ``("new", {"prompt": "current", "cap": 120})``.

    Raises:
        ValueError: no name, an unknown key, a value of the wrong type, or an unknown ``prompt``.
    """
    name, values = replay.parse_config(text, KEYS)
    if values.get("prompt", "stored") not in PROMPTS:
        raise ValueError(f"prompt must be one of {PROMPTS}, not {values['prompt']!r}")
    return name, values


def _parents(run_dir: Path) -> dict[str, str]:
    """A child's code as its Summarizer request shows it (no docstrings) -> its parent's source, for a run."""
    path = run_dir / "programs.jsonl"
    if not path.exists():
        return {}
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    sources = {r["id"]: r.get("source", "") for r in records}
    return {without_docstrings(r["source"]): sources.get(r.get("parent_id") or "", "")
            for r in records if r.get("source") and r.get("parent_id")}


def summarizer_requests(run_dir: Path) -> list[dict]:
    """The first-attempt Summarizer requests of a run, each with its parts and its stored ``messages``.

    The parts are ``title``, ``parent`` (the parent's abstract, or None), ``code``, ``feedback``,
    ``novel_only`` and ``parent_code`` (the parent's source where the run's ``programs.jsonl`` has it,
    else "").

    Raises:
        FileNotFoundError: the run has no transcript.
        ValueError: a request is not laid out as ``prompts.summarizer.messages`` lays one out (names the run).
    """
    requests, parents = [], _parents(run_dir)
    for row in transcript.read(run_dir):
        if row["role"] != "summarizer" or row["attempt"] != 1:
            continue
        match = REQUEST.match(row["messages"][-1]["content"])
        if not match:
            raise ValueError(f"{run_dir}: a Summarizer request this benchmark cannot read")
        requests.append({"run": run_dir.name, "messages": row["messages"], "title": match["title"],
                         "parent": match["parent"], "code": match["code"],
                         "feedback": match["feedback"] or "", "novel_only": "ONLY" in match["instruction"],
                         "parent_code": parents.get(match["code"], "") if match["parent"] else ""})
    return requests


def messages_for(request: dict, values: dict) -> list:
    """The request under configuration ``values`` (stored bytes, or rendered again; docstrings optional)."""
    if values.get("prompt", "stored") == "current":
        code = without_docstrings(request["code"]) if values.get("nodoc") else request["code"]
        novelty = "novel_only" if request["novel_only"] else "inherited"
        return summarizer.messages(request["title"], code, request["parent"], novelty, request["feedback"])
    stored = convert_to_messages(request["messages"])
    if values.get("nodoc"):
        text = stored[-1].content.replace(request["code"], without_docstrings(request["code"]), 1)
        stored = [*stored[:-1], HumanMessage(text)]
    return stored


def ask(messages: list, seed: int, cap: int) -> dict:
    """One Summarizer request as a run sends it (``call_role``), after :func:`~benchmarks.replay.flush`.

    It goes to the embedded model or the environment's endpoint; returns its reply, tokens, seconds and
    whether the cap cut it.
    """
    replay.flush("summarizer")
    start = time.perf_counter()
    try:
        ctx = RunContext(seed=seed, max_retries=0, max_tokens={"summarizer": cap})
        reply = call_role("summarizer", messages, ctx)
    except MalformedReply as exc:
        return {"seconds": time.perf_counter() - start, "text": "", "truncated": False,
                "garbled": str(exc)[:200], "prompt": 0, "completion": 0}
    usage = reply.usage.get("summarizer", {})
    return {"seconds": time.perf_counter() - start, "text": reply.text, "truncated": reply.truncated,
            "prompt": usage.get("prompt", 0), "completion": usage.get("completion", 0)}


def echoes(text: str, parent: str | None) -> bool:
    """Whether ``text``'s first sentence is one of ``parent``'s (the reply began by repeating it)."""
    first = sentences(text)[:1]
    return bool(parent and first and first[0] in sentences(parent))


def copies_changed(abstract: str, parent: str | None) -> bool:
    """Whether ``abstract``'s "Changed:" sentence is the parent abstract's, word for word."""
    mine = changed_sentence(abstract)
    return bool(parent and mine and mine == changed_sentence(parent))


WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")


def names_a_change(abstract: str, parent_code: str, child_code: str) -> bool:
    """Whether ``abstract``'s "Changed:" sentence names a word the child added and its parent lacks.

    A word is an identifier of 4+ characters, in any case, ``_`` read as a space: a coarse sign that the
    sentence describes the child's own change rather than its parent.
    """
    added = " ".join(line[2:] for line in changed_lines(parent_code, child_code) if line.startswith("+ "))
    new = {w.lower() for w in WORD.findall(added)} - {w.lower() for w in WORD.findall(parent_code)}
    said = changed_sentence(abstract).lower().replace("_", " ")
    return any(w.replace("_", " ") in said for w in new)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def main() -> int:
    """Replay every stored Summarizer request under each configuration, and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--config", action="append", required=True, metavar="NAME=key=value,...")
    parser.add_argument("--limit", type=int, help="first N requests of each run (after --parents-only)")
    parser.add_argument("--parents-only", action="store_true", help="only requests with a parent abstract")
    parser.add_argument("--out", type=Path, default=Path("runs/summarizer_replay.json"))
    args = parser.parse_args()
    try:
        configs = dict(parse_config(c) for c in args.config)
        requests = []
        for run_dir in args.runs:
            found = [r for r in summarizer_requests(run_dir) if r["parent"] or not args.parents_only]
            requests += found[:args.limit]
    except (FileNotFoundError, ValueError) as exc:
        parser.error(str(exc))
    rows: list[dict] = []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for n, request in enumerate(requests):
        row = {"run": request["run"], "n": n, "parent": request["parent"]}
        for name, values in configs.items():
            cap = values.get("cap", DEFAULT_MAX_TOKENS["summarizer"])
            out = ask(messages_for(request, values), seed=n, cap=cap)
            out["abstract"] = finish_abstract(out["text"], request["parent"], out["truncated"])
            out["echo"] = echoes(out["text"], request["parent"])
            out["copies_changed"] = copies_changed(out["abstract"], request["parent"])
            out["names_change"] = bool(request["parent_code"]) and names_a_change(
                out["abstract"], request["parent_code"], request["code"])
            row[name] = out
            args.out.write_text(json.dumps([*rows, row], indent=2))  # what was measured survives a crash
            print(f"{request['run']} #{n} {name}: {out['prompt']}+{out['completion']} tokens "
                  f"{out['seconds']:.1f} s{' echo' if out['echo'] else ''}"
                  f"{' cut' if out['truncated'] else ''}: {out['abstract']!r}", flush=True)
        rows.append(row)
    print("\n| configuration | requests | prompt tokens / request | completion tokens / request (median) | "
          "s / request (median) | cut at the cap | began with the parent's abstract | \"Changed:\" the "
          "parent's | \"Changed:\" names an added word | words / abstract | garbled |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in configs:
        got = [r[name] for r in rows]
        n = max(len(got), 1)
        seconds = [g["seconds"] for g in got]
        print(f"| {name} | {len(got)} | {sum(g['prompt'] for g in got) / n:.0f} | "
              f"{sum(g['completion'] for g in got) / n:.0f} "
              f"({_median([g['completion'] for g in got]):.0f}) | "
              f"{sum(seconds) / n:.1f} ({_median(seconds):.1f}) | {sum(g['truncated'] for g in got)} | "
              f"{sum(g['echo'] for g in got)} | {sum(g['copies_changed'] for g in got)} | "
              f"{sum(g['names_change'] for g in got)} | "
              f"{sum(len(g['abstract'].split()) for g in got) / n:.0f} | "
              f"{sum('garbled' in g for g in got)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Do two versions of the code ask the LLM the same things? A refactoring check without the LLM.

Runs ``contextevolve run`` from each given source tree against the same scripted endpoint, whose
reply is a pure function of the request (messages, model, temperature, seed, stop, token cap):
two trees that send the same requests in the same order therefore get the same replies and write
the same children. The endpoint logs every request; the script prints, per tree, how many requests
each role made, the children's statuses, failure kinds and a digest of their sources, and then the
first request where the traces differ (or that they are identical).

The scripted Generator answers with a mix chosen by the request's hash: valid Model Placement
children (the projected-KVPR rule with a weight from the hash, so children differ), a child with a
missing import (the mechanical fix), one that does not compile (a failed child), a copy of the initial
program (a twin, then the second ask), prose (an ``edit`` failure) and endpoint faults (an empty
completion, a program cut off at the token cap; the run makes no retries), so the Generator, its
second ask, the import fix and the endpoint-fault paths all run.
Besides the requests, the runs' children must match (statuses, repairs, sources; failure kinds are
shown, not compared, as a tree older than them has none).

    python benchmarks/request_trace.py --trees /path/to/old /path/to/new --iterations 12 --seed 0

Exit code 1 when the traces differ.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes import BETTER_PROGRAM, INITIAL  # noqa: E402

#: The parts of a request that decide its reply (and that a refactoring must keep).
KEYS = ("model", "messages", "temperature", "seed", "stop", "max_tokens", "max_completion_tokens", "top_p",
        "response_format", "n")
MISSING_IMPORT = BETTER_PROGRAM.replace("    ordered = sorted(",
                                        "    heapq.heapify([])\n    ordered = sorted(")
BROKEN = INITIAL[: len(INITIAL) // 2] + "\n    ((\n"


def _digest(data: object) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def reply_for(body: dict, choice: int = 0) -> tuple[str, str]:
    """The scripted reply to ``body`` and its ``finish_reason``: a pure function of its :data:`KEYS`.

    ``choice``: which of the request's ``n`` choices (each another function of the request).
    """
    keyed = {k: body.get(k) for k in KEYS}
    h = int(_digest(keyed if not choice else [keyed, choice])[:12], 16)
    if body.get("model") == "gen":
        kind = h % 12
        weight = 0.05 + (h >> 8) % 300 / 100
        if kind < 5:
            code = BETTER_PROGRAM.replace("model.req_rate / model.slo",
                                          f"{weight:.2f} * model.req_rate / model.slo")
        elif kind == 5:
            code = MISSING_IMPORT
        elif kind == 6:
            code = BROKEN
        elif kind < 9:
            code = INITIAL
        elif kind == 9:
            return "I would rather not change this program.", "stop"
        elif kind == 10:  # an endpoint fault: an empty completion
            return "", "stop"
        else:  # an endpoint fault: cut off at the token cap before a whole program
            return f"Here is the new program.\n```python\n{INITIAL[:300]}", "length"
        return f"Here is the new program.\n```python\n{code}```\n", "stop"
    if body.get("response_format"):
        picks = sorted({1 + h % 5, 1 + (h >> 4) % 5})
        return json.dumps({"exemplars": picks, "why": "diverse ideas"}), "stop"
    replies = ["Greedy placement by KV-cache pressure; sorts models by request rate over SLO.",
               "Balance projected pressure after placing each model rather than the current pressure.",
               "Try placing the largest models first, then fill the GPUs with the most free memory."]
    return replies[h % 3], "stop"


class TraceEndpoint:
    """OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 answering :func:`reply_for`.

    ``requests`` holds every request's :data:`KEYS` in arrival order.
    """

    def __init__(self):
        self.requests: list[dict] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                endpoint.requests.append({k: body.get(k) for k in KEYS})
                answers = [reply_for(body, j) for j in range(int(body.get("n") or 1))]
                words = sum(len(text.split()) for text, _ in answers)
                prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
                raw = json.dumps({"id": "trace", "object": "chat.completion", "created": 0,
                                  "model": body.get("model"),
                                  "choices": [{"index": j, "message": {"role": "assistant", "content": text},
                                               "finish_reason": finish}
                                              for j, (text, finish) in enumerate(answers)],
                                  "usage": {"prompt_tokens": prompt, "completion_tokens": words,
                                            "total_tokens": prompt + words}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        """The endpoint's OpenAI base URL."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def run_flags(tree: Path, form: str) -> list[str]:
    """The ``run`` flags that ask ``tree`` for edit form ``form``, in its names.

    A tree from before ``generation_mode`` became ``edit_form`` (its flags module maps ``generation_mode``
    to ``mode``) takes ``--mode``; a newer tree takes ``--edit-form``.
    """
    flags = tree / "contextevolve" / "flags.py"
    old = flags.exists() and '"generation_mode": "mode"' in flags.read_text()
    return ["--mode" if old else "--edit-form", form]


def trace(endpoint: TraceEndpoint, tree: Path, iterations: int, seed: int,
          flags: list[str]) -> tuple[list[dict], list[dict]]:
    """Run ``tree``'s ``contextevolve run`` against ``endpoint``; the run's requests and program records.

    ``endpoint`` is the same one for every tree (its URL reaches the prompts, in the reasons of endpoint
    faults); ``flags`` are more ``run`` flags (:func:`run_flags`).
    """
    endpoint.requests = []
    with tempfile.TemporaryDirectory(prefix="ce-trace-") as tmp:
        run_dir = Path(tmp) / "run"  # the same path name for every tree
        env = {**os.environ, "PYTHONPATH": str(tree)}
        done = subprocess.run([sys.executable, "-m", "contextevolve.cli", "run", "--task", "model_placement",
                               "--iterations", str(iterations), "--seed", str(seed),
                               "--run-dir", str(run_dir), "--base-url", endpoint.url, "--model", "ctx",
                               "--role-model", "generator=gen", "--max-retries", "0", "--no-report", *flags],
                              env=env, cwd=tmp, capture_output=True, text=True, timeout=1800)
        if done.returncode:
            raise SystemExit(f"{tree}: run failed ({done.returncode}): {done.stderr[-1500:]}")
        records = [json.loads(line) for line in (run_dir / "programs.jsonl").read_text().splitlines()]
    return endpoint.requests, records


def summary(requests: list[dict], records: list[dict]) -> dict:
    """What one tree's run asked and made: requests by model, the children's outcomes, and digests of both."""
    by_model: dict[str, int] = {}
    for r in requests:
        by_model[r["model"]] = by_model.get(r["model"], 0) + 1
    children = [r for r in records if r["iteration"] > 0]
    return {"requests": len(requests), "by_model": by_model,
            "statuses": [c["status"] for c in children],
            "failure_kinds": [c.get("failure_kind", "?") for c in children],
            "repairs": [len(c.get("attempts", [])) for c in children],
            "children_digest": _digest([[c.get(k) for k in ("source", "status", "reason", "diagnostics")]
                                        for c in children])[:16],
            "requests_digest": _digest(requests)[:16]}


def main(argv: list[str] | None = None) -> int:
    """Trace every tree's run and compare each trace with the first tree's; 1 when they differ."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", nargs="+", type=Path, default=[ROOT], help="source trees to compare")
    parser.add_argument("--iterations", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--edit-form", choices=("full", "diff", "functions"), default="full",
                        help="passed on to run (as --mode to a tree older than the flag)")
    parser.add_argument("--samples-per-prompt", type=int, default=None,
                        help="passed on to run (children of one composed prompt; default the trees' own)")
    args = parser.parse_args(argv)
    traces, summaries = [], []
    endpoint = TraceEndpoint()
    for tree in args.trees:
        flags = run_flags(tree.resolve(), args.edit_form)
        if args.samples_per_prompt is not None:
            flags += ["--samples-per-prompt", str(args.samples_per_prompt)]
        requests, records = trace(endpoint, tree.resolve(), args.iterations, args.seed, flags)
        traces.append(requests)
        summaries.append(summary(requests, records))
        print(f"{tree}: {json.dumps(summaries[-1])}", flush=True)
    for other, tree, seen in zip(traces[1:], args.trees[1:], summaries[1:]):
        for n, (a, b) in enumerate(zip(traces[0], other)):
            if a != b:
                keys = [k for k in KEYS if a.get(k) != b.get(k)]
                print(f"{tree}: request {n} differs from {args.trees[0]}'s in {keys}")
                return 1
        if len(other) != len(traces[0]):
            print(f"{tree}: {len(other)} requests against {len(traces[0])}")
            return 1
        differs = [k for k in seen if k != "failure_kinds" and seen[k] != summaries[0][k]]
        if differs:
            print(f"{tree}: its children differ from {args.trees[0]}'s in {differs}")
            return 1
    if len(traces) > 1:
        print(f"identical: {len(traces[0])} requests, in order, from every tree")
    return 0


if __name__ == "__main__":
    sys.exit(main())

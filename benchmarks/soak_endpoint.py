"""The soak benchmark's scripted OpenAI-compatible endpoint: fast, seeded, and faulty on purpose.

It stands in for the LLM in ``benchmarks/soak.py`` only (a benchmark of durability, not of
search quality). It serves ``POST /v1/chat/completions`` on 127.0.0.1 from a thread of the soak's
own process, so it outlives every SIGKILL of the run and counts every token it hands out.

Roles are told apart by model name (the run is started with ``--model ctx --role-model
generator=gen``); the Sampler is the request with a ``response_format``. Each request draws from
one seeded RNG (request order varies between soaks, so a soak is reproducible in its mix, not
request by request):

* a fault, for every role: HTTP 500, a garbage (non-JSON) body, a slow reply (1-4 s), a hang past
  the client's request timeout (answered 504 when the client has gone), or a reply cut off at the
  token cap (``finish_reason: length``);
* otherwise, for the Generator, a child: a valid Model Placement program (the projected-KVPR
  rule with a random weight, so children differ), a broken one (syntax error or a placement that
  drops models), a twin (the initial program or an earlier child), a hostile program from the test
  suite's hostile set, or prose without code; for the context agents a short plausible reply.

Usage (``prompt_tokens``, ``completion_tokens``) is the number of whitespace-separated words of
the prompt and of the reply, and is sent only with a parseable 200 reply: what the client can
count is exactly what :attr:`ScriptedEndpoint.served` holds.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.fakes import BETTER_PROGRAM, INITIAL, INVALID_PROGRAM
from tests.unit.hostile_runner import HOSTILE

#: Probability of each fault per request (any role); the rest are answered normally.
FAULTS = {"http500": 0.04, "garbage": 0.03, "slow": 0.05, "hang": 0.015, "truncated": 0.03}
#: Probability of each kind of Generator reply when no fault is drawn.
CHILDREN = {"valid": 0.5, "broken": 0.15, "twin": 0.1, "hostile": 0.15, "prose": 0.1}
_KVPR = "kvpr = load[gpu_id] / free_mem[gpu_id]"


@dataclass
class Served:
    """One reply the client could count: when it was written, and its usage."""

    at: float
    """``time.monotonic()`` after the reply was written to the socket."""
    prompt: int
    completion: int

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens of the reply."""
        return self.prompt + self.completion


def _words(text: str) -> int:
    return len(str(text).split())


def _completion(contents: list[str], prompt: int, finish: str = "stop") -> dict:
    """A chat completion of one choice per text in ``contents``, its usage summed over them (as OpenAI's)."""
    completion = sum(_words(c) for c in contents)
    return {"id": "soak", "object": "chat.completion", "created": 0, "model": "soak",
            "choices": [{"index": i, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish} for i, content in enumerate(contents)],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion}}


class ScriptedEndpoint:
    """The scripted endpoint the module docstring describes, on 127.0.0.1.

    ``url`` is the OpenAI base URL; ``hang_s`` must exceed the client's request timeout. Thread-safe
    counters: ``served``, ``kinds`` (replies by kind), ``in_flight`` (requests being answered now).
    """

    def __init__(self, seed: int, hang_s: float):
        self.rng = random.Random(seed)
        self.hang_s = hang_s
        self.lock = threading.Lock()
        self.served: list[Served] = []
        self.kinds: dict[str, int] = {}
        self.in_flight = 0
        self.children: list[str] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with endpoint.lock:
                    endpoint.in_flight += 1
                try:
                    endpoint._answer(self, body)
                finally:
                    with endpoint.lock:
                        endpoint.in_flight -= 1

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    @property
    def url(self) -> str:
        """The endpoint's OpenAI base URL."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        """Stop serving and close the listening socket."""
        self.server.shutdown()
        self.server.server_close()

    def served_between(self, start: float, end: float) -> int:
        """Tokens of the replies written in ``(start, end]`` (monotonic seconds)."""
        with self.lock:
            return sum(s.tokens for s in self.served if start < s.at <= end)

    def _draw(self, table: dict[str, float]) -> str | None:
        x = self.rng.random()
        for kind, p in table.items():
            if x < p:
                return kind
            x -= p
        return None

    def _child(self) -> tuple[str, str]:
        kind = self._draw(CHILDREN) or "valid"
        if kind == "valid":
            weight = round(self.rng.uniform(0.05, 3.0), 3)
            code = BETTER_PROGRAM.replace("model.req_rate / model.slo",
                                          f"{weight} * model.req_rate / model.slo")
            self.children.append(code)
        elif kind == "broken":
            code = INVALID_PROGRAM if self.rng.random() < 0.5 else INITIAL[: len(INITIAL) // 2] + "\n    ((\n"
        elif kind == "twin":
            code = self.rng.choice([INITIAL, *self.children[-5:]])
        elif kind == "hostile":
            code = self.rng.choice(list(HOSTILE.values()))
        else:
            return kind, "I would rather not change this program."
        return kind, f"Here is the new program.\n```python\n{code}```\n"

    def _reply(self, body: dict) -> tuple[str, str]:
        if body.get("model") == "gen":
            return self._child()
        if body.get("response_format"):
            picks = sorted(self.rng.sample(range(1, 6), 2))
            return "sampler", json.dumps({"exemplars": picks, "why": "diverse ideas"})
        return "context", self.rng.choice([
            "Greedy placement by KV-cache pressure; sorts models by request rate over SLO.",
            "Balance projected pressure after placing each model rather than the current pressure.",
            "Try placing the largest models first, then fill the GPUs with the most free memory."])

    def _answer(self, handler: BaseHTTPRequestHandler, body: dict) -> None:
        prompt = _words("\n".join(str(m.get("content", "")) for m in body.get("messages", [])))
        with self.lock:
            fault = self._draw(FAULTS)
            replies = [self._reply(body) for _ in range(max(1, int(body.get("n") or 1)))]
            kind, texts = replies[0][0], [text for _, text in replies]
            pause = self.rng.uniform(1, 4) if fault == "slow" else self.rng.uniform(0.02, 0.3)
        if fault == "hang":
            time.sleep(self.hang_s)
            status, payload = 504, {"error": {"message": "the soak endpoint hung on purpose"}}
        elif fault == "http500":
            status, payload = 500, {"error": {"message": "the soak endpoint failed on purpose"}}
        elif fault == "garbage":
            status, payload = 200, None
        else:
            time.sleep(pause)
            if fault == "truncated":
                texts = [text[: max(1, len(text) // 3)] for text in texts]
            status, payload = 200, _completion(texts, prompt, "length" if fault == "truncated" else "stop")
        raw = json.dumps(payload).encode() if payload is not None else b"<html>upstream garbage"
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(raw)))
            handler.end_headers()
            handler.wfile.write(raw)
            handler.wfile.flush()
        except OSError:  # the client was killed or gave up: nothing it could count
            return
        with self.lock:
            label = fault or kind
            self.kinds[label] = self.kinds.get(label, 0) + 1
            if status == 200 and payload is not None:
                usage = payload["usage"]
                self.served.append(Served(time.monotonic(), usage["prompt_tokens"],
                                          usage["completion_tokens"]))

"""An OpenAI-compatible endpoint on 127.0.0.1 that answers like a GPU server: a latency model, not a model.

For ``benchmarks/throughput.py``: it shows how a system uses a fast endpoint that serves several requests at
once (vLLM on a GPU, a hosted API), which this 2-core machine cannot run. Each ``POST .../chat/completions``
waits for one of ``streams`` slots (requests beyond them queue, as at a saturated server), then holds it for
``ttft_s + tpot_s × completion tokens`` (time to first token, time per output token) and answers. A request of
``n`` choices is one prompt read and ``n`` sequences decoded together, as a GPU server batches them: it holds
``n`` slots (at most ``streams``) for ``ttft_s + tpot_s × its longest choice's tokens`` and reports the prompt
once and the choices' completion tokens summed, as OpenAI does.

Replies, by role (the run is started with ``--model ctx --role-model generator=gen``; a peer names ``gen``;
the Sampler is the request with a ``response_format``), drawn from one seeded RNG:

* Generator: a valid Model Placement program different from every earlier one (the projected-KVPR rule with
  a new weight and tie-break; 80 %), a broken one (a syntax error, or a placement that drops models; 10 %) or
  a twin (the initial program or an earlier reply; 10 %), each a whole program in a fenced block, ~1,750
  characters (~440 tokens at 4 characters per token), or in the form a peer's prompt asks for
  (:func:`in_asked_form`: a SEARCH/REPLACE diff, ShinkaEvolve's tags);
* Navigator and Summarizer: one of a few plausible replies of 40-80 words; Sampler: two picks as JSON.

Usage is characters / 4 for both the prompt and the reply. Counters (thread-safe): ``busy_s`` (stream-seconds
served), ``requests``, the in-flight integral for the mean requests in flight (queued ones included), and the
window they are taken over (:meth:`LatencyEndpoint.figures`).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import threading
import time

from aiohttp import web

from tests.fakes import BETTER_PROGRAM, INITIAL, INVALID_PROGRAM

GENERATOR_REPLIES = {"valid": 0.8, "broken": 0.1, "twin": 0.1}
"""Probability of each kind of Generator reply."""
CONTEXT_REPLIES = (
    "The parent places models greedily by the KV-cache pressure each GPU would have after the placement. "
    "It sorts models by request rate over SLO, most demanding first, and skips GPUs without room. "
    "Changed: the pressure is projected with the model's own demand rather than read before placing it.",
    "Balance the projected pressure after each placement rather than the current pressure, and consider "
    "placing the largest models first so that the small ones fill what is left; a tie-break on free memory "
    "keeps the worst GPU from filling up early.",
    "Steps that sorted by demand and projected the pressure improved the score; steps that packed GPUs by "
    "memory alone declined. Keep the projection, try a second pass that moves one model off the worst GPU.",
)


def tokens(text: str) -> int:
    """The token count this endpoint reports for ``text``: characters / 4 (at least 1)."""
    return max(1, len(text) // 4)


def _current_program(prompt: str) -> str | None:
    """The program a peer's prompt shows under its last "# Current program" heading (fenced), if any."""
    heads = list(re.finditer(r"^# Current [Pp]rogram\s*$", prompt, re.M))
    found = re.search(r"```[a-z]*\n(.*?)```", prompt[heads[-1].end():], re.S) if heads else None
    return found.group(1) if found else None


def _block(program: str) -> str:
    """The EVOLVE-BLOCK part of ``program`` (all of it when unmarked)."""
    found = re.search(r"# EVOLVE-BLOCK-START\n(.*?)# EVOLVE-BLOCK-END", program, re.S)
    return found.group(1) if found else program


def in_asked_form(body: dict, code: str) -> str:
    """``code`` in the form the request asks for.

    A peer's diff prompt gets a SEARCH/REPLACE diff of the whole EVOLVE-BLOCK of the current program it
    shows; ShinkaEvolve's prompts get its ``<DIFF>``/``<CODE>`` tags; the rest a fenced program.
    """
    prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    shinka = "<DIFF>" in prompt or "<CODE>" in prompt
    current = _current_program(prompt) if "<<<<<<< SEARCH" in prompt else None
    if current is not None:
        diff = (f"<<<<<<< SEARCH\n{_block(current).rstrip()}\n=======\n{_block(code).rstrip()}\n"
                ">>>>>>> REPLACE\n")
        text = f"<DIFF>\n{diff}</DIFF>" if shinka else diff
    else:
        text = f"<CODE>\n```python\n{code}```\n</CODE>" if shinka else f"```python\n{code}```"
    head = "<NAME>projected_kvpr</NAME>\n<DESCRIPTION>Weigh the projected pressure.</DESCRIPTION>\n"
    return (head if shinka else "Here is the new program.\n") + text + "\n"


class LatencyEndpoint:
    """See the module docstring. ``url`` is the OpenAI base URL; :meth:`figures` what it measured."""

    def __init__(self, *, streams: int = 8, ttft_s: float = 0.3, tpot_s: float = 0.025, seed: int = 0):
        self.streams, self.ttft_s, self.tpot_s = streams, ttft_s, tpot_s
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.busy_s = 0.0
        self.requests = 0
        self.kinds: dict[str, int] = {}
        self.children: list[str] = []
        self.serial = 0
        self._in_flight = 0
        self._flight_area = 0.0  # integral of requests in flight over time
        self._flight_at = time.monotonic()
        self.first_at: float | None = None  # monotonic time of the first request, and of the last reply
        self.last_at: float | None = None
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        threading.Thread(target=self._serve, args=(started,), daemon=True).start()
        started.wait(10)

    # --- serving -------------------------------------------------------------------------------------
    def _serve(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.free = self.streams
        self.freed = asyncio.Condition()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._answer)
        runner = web.AppRunner(app, access_log=None)
        self.loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]
        started.set()
        self.loop.run_forever()

    @property
    def url(self) -> str:
        """The endpoint's OpenAI base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        """Stop the endpoint's event loop: no request is answered after it."""
        self.loop.call_soon_threadsafe(self.loop.stop)

    def _flight(self, change: int) -> None:
        now = time.monotonic()
        with self.lock:
            self._flight_area += self._in_flight * (now - self._flight_at)
            self._flight_at, self._in_flight = now, self._in_flight + change

    async def _answer(self, request: web.Request) -> web.Response:
        body = await request.json()
        with self.lock:
            self.first_at = time.monotonic() if self.first_at is None else self.first_at
        self._flight(+1)
        try:
            n = max(1, int(body.get("n") or 1))
            with self.lock:
                replies = [self._reply(body) for _ in range(n)]
            texts = [text for _, text in replies]
            service = self.ttft_s + self.tpot_s * max(tokens(t) for t in texts)
            held = min(n, self.streams)
            async with self.freed:
                await self.freed.wait_for(lambda: self.free >= held)
                self.free -= held
            try:
                await asyncio.sleep(service)
            finally:
                async with self.freed:
                    self.free += held
                    self.freed.notify_all()
            prompt = tokens("\n".join(str(m.get("content", "")) for m in body.get("messages", [])))
            completion = sum(tokens(t) for t in texts)
            with self.lock:
                self.busy_s += service * held
                self.requests += 1
                for kind, _ in replies:
                    self.kinds[kind] = self.kinds.get(kind, 0) + 1
                self.last_at = time.monotonic()
            return web.json_response({
                "id": f"lat-{self.requests}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "gen"),
                "choices": [{"index": i, "message": {"role": "assistant", "content": text},
                             "finish_reason": "stop"} for i, text in enumerate(texts)],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion}})
        finally:
            self._flight(-1)

    # --- replies -------------------------------------------------------------------------------------
    def _draw(self) -> str:
        x = self.rng.random()
        for kind, p in GENERATOR_REPLIES.items():
            if x < p:
                return kind
            x -= p
        return "valid"

    def _program(self) -> str:
        self.serial += 1
        weight = round(0.5 + self.serial * 0.01 + self.rng.random() * 0.001, 5)  # never the same twice
        rule = f"{weight} * model.req_rate / model.slo)"
        code = BETTER_PROGRAM.replace("model.req_rate / model.slo)", rule, 1)
        return code.replace("if kvpr < best_kvpr:", f"if kvpr < best_kvpr - {self.serial}e-12:")

    def _reply(self, body: dict) -> tuple[str, str]:
        if body.get("response_format"):
            picks = sorted(self.rng.sample(range(1, 6), 2))
            why = "one close to the parent, one far from it"
            return "sampler", json.dumps({"exemplars": picks, "why": why})
        if body.get("model") != "gen":
            return "context", self.rng.choice(CONTEXT_REPLIES)
        kind = self._draw()
        if kind == "valid":
            code = self._program()
            self.children.append(code)
        elif kind == "broken":
            code = INVALID_PROGRAM if self.rng.random() < 0.5 else INITIAL[: len(INITIAL) // 2] + "\n    ((\n"
        else:
            code = self.rng.choice([INITIAL, *self.children[-5:]])
        return f"generator-{kind}", in_asked_form(body, code)

    # --- measuring -----------------------------------------------------------------------------------
    def figures(self) -> dict[str, float]:
        """The figures over the window from the first request to the last reply.

        They are ``wall_s``, ``busy`` (busy stream-seconds / (streams × wall)), ``in_flight`` (mean requests
        in flight, queued ones included) and ``requests``.
        """
        with self.lock:
            if self.first_at is None or self.last_at is None:
                return {"wall_s": 0.0, "busy": 0.0, "in_flight": 0.0, "requests": 0}
            wall = max(self.last_at - self.first_at, 1e-9)
            return {"wall_s": wall, "busy": self.busy_s / (self.streams * wall),
                    "in_flight": self._flight_area / wall, "requests": self.requests}


def main() -> None:
    """``python -m benchmarks.latency_endpoint [--streams N] [--ttft S] [--tpot S]``: serve until interrupted.

    Prints the base URL; e.g. ``contextevolve compare --base-url URL --model gen ...`` runs every system
    against it.
    """
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--ttft", type=float, default=0.3, help="time to first token, seconds")
    parser.add_argument("--tpot", type=float, default=0.025, help="time per output token, seconds")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    endpoint = LatencyEndpoint(streams=args.streams, ttft_s=args.ttft, tpot_s=args.tpot, seed=args.seed)
    print(endpoint.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        endpoint.close()
        print(json.dumps({**endpoint.figures(), "kinds": endpoint.kinds}))


if __name__ == "__main__":
    main()

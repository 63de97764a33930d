"""A scripted OpenAI-compatible HTTP endpoint for unit tests (never used outside tests).

``FakeEndpoint(reply)`` serves ``/v1/chat/completions``, ``/v1/completions`` and ``/v1/models``
on a free port of 127.0.0.1 in a background thread. ``reply(body) -> str`` writes each answer;
usage is the number of whitespace-separated words of the prompt and of the answer, so a test
can recompute what the endpoint reported. Streaming is refused (HTTP 400), as the counting
proxy must never stream upstream. Every request body is kept in ``requests``.

A request of ``n`` choices calls ``reply`` ``n`` times; ``choices`` says how the endpoint treats it: ``sum``
(OpenAI: ``n`` choices, usage summed over them), ``one`` (llama.cpp's server: ``n`` choices, usage of the
first only), ``refuse`` (HTTP 400 naming the parameter) or ``ignore`` (one choice). ``POST /tokenize``
counts ``{"content": text}`` in words, as llama.cpp's server counts in tokens.

tests/unit/test_endpoint_faults.py keeps a server of its own (stdlib ``http.server``): its tests script
whole raw responses (any status, content type and body bytes, malformed ones included) and count requests
by model and status, where this one computes well-formed completions and their usage.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Callable

from aiohttp import web


def words(text: str) -> int:
    """The fake endpoint's token count: whitespace-separated words."""
    return len(str(text).split())


def prompt_text(body: dict) -> str:
    """The prompt of a chat or plain completion request, as one string."""
    if "messages" in body:
        return "\n".join(str(m.get("content", "")) for m in body["messages"])
    return str(body.get("prompt", ""))


class FakeEndpoint:
    """See the module docstring. ``url`` is the OpenAI base URL (``http://127.0.0.1:PORT/v1``)."""

    def __init__(self, reply: Callable[[dict], str], choices: str = "sum"):
        self.reply = reply
        self.choices = choices
        self.requests: list[dict] = []
        self.url: str | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._ready = threading.Event()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._complete)
        app.router.add_post("/v1/completions", self._complete)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/tokenize", self._tokenize)
        runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        host, port = runner.addresses[0][:2]
        self.url = f"http://{host}:{port}/v1"
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake"}]})

    async def _tokenize(self, request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({"tokens": list(range(words(body.get("content", ""))))})

    async def _complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        if body.get("stream"):
            return web.json_response({"error": {"message": "streaming not supported"}}, status=400)
        n = int(body.get("n") or 1)
        if n > 1 and self.choices == "refuse":
            return web.json_response({"error": {"message": "Unsupported parameter: 'n'", "param": "n",
                                                "code": "unsupported_parameter"}}, status=400)
        texts = [self.reply(body) for _ in range(1 if self.choices == "ignore" else n)]
        counted = texts[:1] if self.choices == "one" else texts
        usage = {"prompt_tokens": words(prompt_text(body)),
                 "completion_tokens": sum(words(t) for t in counted)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if "messages" in body:
            choices = [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                       for i, t in enumerate(texts)]
            kind = "chat.completion"
        else:
            choices = [{"index": i, "text": t, "finish_reason": "stop"} for i, t in enumerate(texts)]
            kind = "text_completion"
        return web.json_response({"id": f"fake-{len(self.requests)}", "object": kind, "created": 0,
                                  "model": body.get("model", "fake"), "choices": choices, "usage": usage})

    def __enter__(self) -> FakeEndpoint:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

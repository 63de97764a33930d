"""A local OpenAI-compatible proxy that counts the tokens of every LLM request.

Each system in a comparison reaches the endpoint through one :class:`CountingProxy`, under its own path:
``http://127.0.0.1:PORT/<label>/v1`` forwards to the upstream ``.../v1``, and each ``chat/completions`` or
``completions`` request becomes a :class:`RequestRecord` with the endpoint's own ``usage`` (a refused one:
its HTTP status, no tokens); other paths pass uncounted. A streamed request goes upstream unstreamed and is
replayed as server-sent events (one content chunk, one finish chunk, a usage chunk if the client asked for
``stream_options.include_usage``, ``[DONE]``), so counts stay exact where streams report no usage (why:
docs/compare.md, *One endpoint, one counter*).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Literal

import aiohttp
from aiohttp import web
from pydantic import BaseModel

SeedPolicy = Literal["distinct", "remove", "keep"]
"""What the proxy does with a request's ``seed``: ``distinct`` replaces it by ``base_seed * 1_000_003 + n``
(n: the proxy's request counter, so a rerun sending requests in the same order is reproducible), ``remove``
drops it, ``keep`` leaves it (why distinct: docs/compare.md, *One endpoint, one counter*)."""
COUNTED = ("chat/completions", "completions")


class RequestRecord(BaseModel):
    """One counted LLM request, as the endpoint reported it."""

    label: str
    """The path prefix it came in under (one per system and seed in a comparison)."""
    endpoint: str
    """``chat/completions`` or ``completions``."""
    status: int
    """The upstream's HTTP status (599 when it could not be reached)."""
    prompt_tokens: int = 0
    """Prompt tokens from the upstream's ``usage`` (0 when it reported none)."""
    completion_tokens: int = 0
    """Completion tokens from the upstream's ``usage``."""
    usage_reported: bool = False
    """False when the upstream's reply had no ``usage``: its tokens are unknown, not zero."""
    streamed: bool = False
    """The client asked for a stream (served from an unstreamed upstream request)."""
    seed: int | None = None
    """The seed sent upstream, after the seed policy."""
    seconds: float = 0.0
    """Wall seconds from receiving the request to having the upstream's reply."""
    started: float = 0.0
    """Unix time the request arrived."""

    @property
    def total_tokens(self) -> int:
        """Prompt + completion tokens."""
        return self.prompt_tokens + self.completion_tokens


class CountingProxy:
    """A counting proxy in a background thread of this process (reachable from any process).

    Args:
        upstream: the endpoint's OpenAI base URL, e.g. ``http://127.0.0.1:8080/v1``.
        api_key: sent upstream as ``Authorization: Bearer`` when the client sent none.
        seed_policy: what to do with each request's ``seed`` (:data:`SeedPolicy`).
        base_seed: the comparison's seed, mixed into distinct per-request seeds.
        log_path: a JSON-lines file each :class:`RequestRecord` is appended to.
        overrides: request fields set on every counted request (sampling settings).
        timeout_s: limit for one upstream request, seconds.

    A context manager, or :meth:`start` / :meth:`stop`; :meth:`url` gives a system its base URL.

    Raises:
        ValueError: an unknown ``seed_policy``.
    """

    def __init__(self, upstream: str, *, api_key: str | None = None, seed_policy: SeedPolicy = "distinct",
                 base_seed: int = 0, log_path: Path | None = None, timeout_s: float = 1800.0,
                 overrides: dict | None = None):
        if seed_policy not in ("distinct", "remove", "keep"):
            raise ValueError(f"seed_policy must be distinct, remove or keep, not {seed_policy!r}")
        self.upstream = upstream.rstrip("/")
        self.api_key = api_key
        self.seed_policy = seed_policy
        self.base_seed = base_seed
        self.log_path = Path(log_path) if log_path else None
        self.timeout_s = timeout_s
        self.overrides = dict(overrides or {})
        self._records: list[RequestRecord] = []
        self._lock = threading.Lock()
        self._counter = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.base_url: str | None = None

    # -- life cycle ---------------------------------------------------------------------------
    def start(self, timeout_s: float = 30.0) -> str:
        """Start serving on a free port of 127.0.0.1; returns ``http://127.0.0.1:PORT``.

        Raises:
            RuntimeError: the server cannot start (or did not within ``timeout_s``).
        """
        if self.base_url:
            return self.base_url
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._open())
            except BaseException as exc:  # reported to start()
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._close())
            loop.close()

        self._thread = threading.Thread(target=serve, name="counting-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(timeout_s) or failure:
            raise RuntimeError(f"the counting proxy did not start: {failure[0] if failure else 'timed out'}")
        return self.base_url

    async def _open(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{label}/v1/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        self.base_url = f"http://{host}:{port}"

    async def _close(self) -> None:
        if self._session:
            await self._session.close()
        if self._runner:
            await self._runner.cleanup()

    def stop(self) -> None:
        """Stop serving (records stay readable)."""
        if self._loop and self._thread and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self.base_url = None

    def __enter__(self) -> CountingProxy:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def url(self, label: str) -> str:
        """The OpenAI base URL a system should use: ``http://127.0.0.1:PORT/<label>/v1``."""
        if not self.base_url:
            raise RuntimeError("the counting proxy is not running: call start() first")
        if not label or "/" in label:
            raise ValueError(f"a proxy label is one non-empty path segment, not {label!r}")
        return f"{self.base_url}/{label}/v1"

    # -- records ------------------------------------------------------------------------------
    def records(self, label: str | None = None) -> list[RequestRecord]:
        """The counted requests so far, all or those of one label, in arrival order."""
        with self._lock:
            return [r for r in self._records if label is None or r.label == label]

    def totals(self, label: str | None = None) -> dict[str, int]:
        """``{"requests", "prompt_tokens", "completion_tokens", "total_tokens", "unreported"}``."""
        records = self.records(label)
        prompt = sum(r.prompt_tokens for r in records)
        completion = sum(r.completion_tokens for r in records)
        return {"requests": len(records), "prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "unreported": sum(not r.usage_reported and r.status == 200 for r in records)}

    def _record(self, record: RequestRecord) -> None:
        with self._lock:
            self._records.append(record)
            if self.log_path:
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                with self.log_path.open("a") as log:
                    log.write(record.model_dump_json() + "\n")

    def _next_seed(self, seed: object) -> int | None:
        with self._lock:
            self._counter += 1
            n = self._counter
        if self.seed_policy == "remove":
            return None
        if self.seed_policy == "keep":
            return seed if isinstance(seed, int) else None
        return (self.base_seed * 1_000_003 + n) % (2**31 - 1)

    # -- forwarding ---------------------------------------------------------------------------
    def _headers(self, request: web.Request) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        auth = request.headers.get("Authorization")
        if auth and auth.strip().lower() not in ("bearer", "bearer none", "bearer sk-none"):
            headers["Authorization"] = auth
        elif self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    async def _choices_counted(self, reply: dict) -> int | None:
        """Completion tokens of a reply of several choices, each counted by the upstream's ``/tokenize``.

        llama.cpp's server reports one choice's completion for a request of ``n``; counted this way a reply
        of several choices costs what the same replies cost as ``n`` requests, so comparisons at equal tokens
        stay equal. None for one choice, or an upstream without ``/tokenize`` (its report is then kept).
        """
        choices = reply.get("choices") or []
        if len(choices) < 2:
            return None
        root = self.upstream.removesuffix("/v1")
        total = 0
        for choice in choices:
            text = ((choice.get("message") or {}).get("content") or choice.get("text") or "") \
                if isinstance(choice, dict) else ""
            try:
                async with self._session.post(f"{root}/tokenize", json={"content": text}) as resp:
                    if resp.status != 200:
                        return None
                    total += len((await resp.json()).get("tokens") or [])
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, AttributeError):
                return None
        return total

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        label, path = request.match_info["label"], request.match_info["path"].strip("/")
        target = f"{self.upstream}/{path}"
        if request.method != "POST" or path not in COUNTED:
            async with self._session.request(request.method, target, headers=self._headers(request),
                                             params=request.query, data=await request.read()) as upstream:
                return web.Response(status=upstream.status, body=await upstream.read(),
                                    content_type=upstream.content_type)
        started = time.time()
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("the request body is not a JSON object")
        except (ValueError, json.JSONDecodeError) as exc:
            return web.json_response({"error": {"message": f"counting proxy: unreadable request: {exc}"}},
                                     status=400)
        streamed = bool(body.get("stream"))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        body["stream"] = False
        body.pop("stream_options", None)
        body.update(self.overrides)
        seed = self._next_seed(body.get("seed"))
        body.pop("seed", None)
        if seed is not None:
            body["seed"] = seed
        record = RequestRecord(label=label, endpoint=path, status=599, streamed=streamed, seed=seed,
                               started=started)
        try:
            async with self._session.post(target, json=body, headers=self._headers(request)) as upstream:
                record.status = upstream.status
                raw = await upstream.read()
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            record.seconds = time.time() - started
            self._record(record)
            return web.json_response({"error": {"message": f"counting proxy: upstream {target}: {exc!r}"}},
                                     status=502)
        record.seconds = time.time() - started
        try:
            reply = json.loads(raw)
        except ValueError:
            reply = None
        usage = reply.get("usage") if isinstance(reply, dict) else None
        if isinstance(usage, dict):
            record.prompt_tokens = int(usage.get("prompt_tokens") or 0)
            record.completion_tokens = int(usage.get("completion_tokens") or 0)
            record.usage_reported = True
            counted = await self._choices_counted(reply)
            if counted is not None and counted > record.completion_tokens:
                record.completion_tokens = usage["completion_tokens"] = counted
                usage["total_tokens"] = record.prompt_tokens + counted
        self._record(record)
        if record.status != 200 or not isinstance(reply, dict):
            return web.Response(status=record.status, body=raw, content_type="application/json")
        if not streamed:
            return web.json_response(reply)
        return await self._replay_as_stream(request, reply, path, include_usage)

    async def _replay_as_stream(self, request: web.Request, reply: dict, path: str,
                                include_usage: bool) -> web.StreamResponse:
        """Send an unstreamed reply as the server-sent events a streaming client expects."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        kind = "chat.completion.chunk" if path == "chat/completions" else "text_completion"
        common = {"id": reply.get("id", "proxy"), "object": kind,
                  "created": reply.get("created", int(time.time())), "model": reply.get("model", "")}
        chunks = []
        for choice in reply.get("choices") or []:
            index = choice.get("index", 0)
            if path == "chat/completions":
                message = choice.get("message") or {}
                delta = {"role": message.get("role", "assistant"), "content": message.get("content") or ""}
                chunks.append({**common,
                               "choices": [{"index": index, "delta": delta, "finish_reason": None}]})
                chunks.append({**common, "choices": [{"index": index, "delta": {},
                                                      "finish_reason": choice.get("finish_reason")}]})
            else:
                chunks.append({**common, "choices": [{"index": index, "text": choice.get("text") or "",
                                                      "finish_reason": choice.get("finish_reason")}]})
        if include_usage and reply.get("usage"):
            chunks.append({**common, "choices": [], "usage": reply["usage"]})
        for chunk in chunks:
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

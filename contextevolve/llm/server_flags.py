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
"""Cap of the RAM prompt cache, MB; 0 (the default) = off.

llama-cpp-python's ``--cache`` (llama.cpp's own server: ``--cache-ram``) keeps earlier prompts' KV state
so a request starting like a kept prompt skips reading that part again. llama-cpp-python 0.3.36's cap
counts only the KV state, not the copy of its logits buffer it keeps with every entry (n_batch 512 x
151,936 float32 = 311 MB), so the memory it takes is many times the cap; ``$CONTEXTEVOLVE_PROMPT_CACHE_MB``
switches it on at a cap (why it is off, and what it cost: docs/embedded-model.md, *Starting and stopping
the server*). Without it the server still reuses the prefix a request shares with the request just
before."""


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

The library's default is True (its ``logits_all``, needed only for ``logprobs``, which no agent asks for):
then every prompt token also goes through the output layer (151,936 x 1,536 weights, a seventh of the model's
weights) and its 151,936 float32 logits (607 KB) are copied into an array of n_ctx rows that fills up to the
longest prompt read (an 8k context: up to 5 GB; why it is off: docs/embedded-model.md, *Starting and stopping
the server*). ``$CONTEXTEVOLVE_LOGITS_ALL=1`` restores the library's default (for before/after measurements).
Anyone adding a draft model (speculative or prompt-lookup decoding) must set it too: llama-cpp-python 0.3.36
then keeps every token's logits anyway but sizes its logits array by this setting, and fails past 512
tokens."""


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

``native``: llama.cpp's own ``llama-server``, built by ``make setup`` (``make native-server``) from the
llama.cpp sources of the installed llama-cpp-python, with the same CPU flags; it drafts tokens from the
conversation (:data:`SPECULATIVE_KINDS`) and gives a server one slot per worker, decoding the slots' requests
in one batch (docs/embedded-model.md). ``python``: llama-cpp-python's ``llama_cpp.server``; it decodes one
request at a time and drafts nothing. The default is ``native`` where its binary is installed
(:func:`installed_native_binary`) and ``python`` elsewhere, so an install without the build still runs."""


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

``ngram-simple`` (default): when the last 12 tokens written also occur earlier in the conversation, the up
to 48 tokens that followed them there are proposed as a draft, and the model checks the whole draft in one
batch (read like a prompt), keeping the tokens it would have sampled itself and sampling the first one it
would not (llama.cpp's ``ngram-simple`` type; sizes are its defaults). A child program copies most of its
parent, which its prompt holds, so most of a Generator or repair reply can be drafted. Replies with nothing
to copy (prose) find no match and pay nothing. ``none`` turns it off. llama-cpp-python's server
(``python``) never drafts (why, and what drafting saves: docs/embedded-model.md, *Drafting from the
prompt*)."""


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
        port: the port on 127.0.0.1 the server listens on.
        threads: decode and prompt-reading threads.
        n_ctx: context window per request, in tokens.
        slots: requests decoded together (``native`` only: llama-server's ``--parallel``; its context is
            ``n_ctx * slots`` tokens, split evenly between the slots). llama-cpp-python's server queues
            concurrent requests instead (``--interrupt_requests False``: a queued request never cuts a
            running one short).

    The native server also drafts as :func:`speculative` says; llama-cpp-python's keeps only the last
    token's logits unless :func:`logits_all`.

    Raises:
        ValueError: ``slots`` < 1.
        EmbeddedModelError: a server variable of this module is malformed, or the native server is not
            installed.
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

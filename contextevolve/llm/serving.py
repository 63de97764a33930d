"""What serves a run's LLM calls, recorded where a user can read it back.

A run's speed depends on which embedded server it got (docs/results.md, *Drafting from the prompt*), so
:func:`contextevolve.api.evolve` appends a :func:`describe` entry to ``RUN_DIR/served_by.jsonl`` at every
start and resume; ``contextevolve status`` and ``run`` print the latest (:func:`text`), and
``benchmarks/effectiveness.py`` stores it with its figures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextevolve.graph.context import RunContext

SERVED_BY_FILE = "served_by.jsonl"
"""One JSON object per start or resume of a run, oldest first, in the run directory."""

KIND_NAMES = {"native": "llama.cpp's own server", "python": "llama-cpp-python's server"}
"""How :func:`text` names each :data:`~contextevolve.llm.server_flags.SERVER_KINDS` entry."""

VECTOR_EXTENSIONS = ("AVX512", "AVX2", "AVX", "SSE3", "SVE", "NEON")
"""The vector instruction sets :func:`build_text` looks for in llama.cpp's system-info string, widest first
(decoding speed on a CPU follows the widest one the build uses)."""


def describe(ctx: RunContext) -> dict[str, Any]:
    """What would answer a run's requests under ``ctx`` and the environment, read now.

    Returns:
        ``{"endpoint": URL}`` when no switched-on role uses the embedded model (the Generator's endpoint;
        None for chat models given in code); else ``{"server_kind": "native"|"python", "speculative": str,
        "prompt_cache": bool, "logits_all": bool, "llama_cpp_build": str, "workers": int,
        "embedded_servers": [key, ...]}``: :func:`~contextevolve.llm.server_flags.server_kind`,
        :func:`~contextevolve.llm.server_flags.drafts`, whether the RAM prompt cache is on, whether every
        prompt token's logits are kept (``python`` only), the build's CPU features (``"unknown (...)"``
        without llama-cpp-python), the workers, :func:`~contextevolve.llm.models.embedded_server_keys`.

    Raises:
        EmbeddedModelError: a server variable (``CONTEXTEVOLVE_LLAMA_SERVER``, ``..._SPECULATIVE``,
            ``..._LLAMA_SERVER_BIN``) is malformed.
    """
    from contextevolve.llm import embedded, models

    if not models.needs_embedded(ctx):
        return {"endpoint": models.resolve_endpoint("generator", ctx).base_url}
    kind = embedded.server_kind()
    try:
        build = embedded.build_features()
    except embedded.EmbeddedModelError as exc:
        build = f"unknown ({exc})"
    return {"server_kind": kind, "speculative": embedded.drafts(),
            "prompt_cache": bool(embedded.prompt_cache_args()),
            "logits_all": kind == "python" and embedded.logits_all(), "llama_cpp_build": build,
            "workers": ctx.parallelism.workers, "embedded_servers": models.embedded_server_keys(ctx)}


def record(run_dir: Path, entry: dict[str, Any], *, resumed: bool) -> None:
    """Append ``entry`` (a :func:`describe` result) to ``run_dir``'s :data:`SERVED_BY_FILE`.

    The line is marked with the time (ISO 8601, UTC) and whether the run was resumed.
    """
    from datetime import datetime, timezone

    line = {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "resumed": resumed, **entry}
    with (Path(run_dir) / SERVED_BY_FILE).open("a") as f:
        f.write(json.dumps(line) + "\n")


def recorded(run_dir: Path) -> list[dict[str, Any]]:
    """The entries of ``run_dir``'s :data:`SERVED_BY_FILE`, oldest first.

    ``[]`` for a run from before it was written. A line that is not a JSON object (a write cut short by a
    kill) is skipped.
    """
    path = Path(run_dir) / SERVED_BY_FILE
    if not path.exists():
        return []
    entries = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def build_text(build: str) -> str:
    """The widest vector extension a llama.cpp build uses, as ``"AVX512 build"``.

    It is read from the build's system-info string (``"CPU : SSE3 = 1 | ... | AVX2 = 1 | AVX512 = 1 | ..."``,
    the ``llama_cpp_build`` of a :func:`describe` entry); a string without ``NAME = 1`` pairs (``"unknown
    (...)"``, an older record) is returned as it is, and one whose pairs name none of
    :data:`VECTOR_EXTENSIONS` gives ``"build without AVX/NEON"``. Anything but a string (a hand-edited record)
    is shown as ``str()`` of it rather than stopping ``status``.
    """
    if not isinstance(build, str):
        return str(build)
    enabled = {name.strip().rsplit(" ", 1)[-1] for name, _, value in
               (pair.partition("=") for pair in build.split("|")) if value.strip() == "1"}
    if not enabled:
        return build
    widest = next((ext for ext in VECTOR_EXTENSIONS if ext in enabled), None)
    return f"{widest} build" if widest else "build without AVX/NEON"


def text(entry: dict[str, Any]) -> str:
    """One line naming what served a run, from a :func:`describe` entry.

    Also reads the older records of ``benchmarks/effectiveness.py``, which lack some keys (a record without
    ``logits_all`` is from before the servers stopped keeping every token's logits). E.g. ``"embedded
    model, llama.cpp AVX512 build, llama.cpp's own server, drafts ngram-simple, servers shared, navigator,
    generator"`` (the build as :func:`build_text` shortens it; the entry keeps the whole string).
    """
    if "endpoint" in entry:
        return entry["endpoint"] or "chat models given in code"
    servers = entry.get("embedded_servers")
    layout = "" if servers is None else (", one server" if servers == ["shared"]
                                         else f", servers {', '.join(servers)}")
    kind = KIND_NAMES.get(entry.get("server_kind"), "")
    n = entry.get("workers", entry.get("lanes", 1))  # (records before workers said "lanes")
    workers = f", {n} workers" if n != 1 else ""
    drafts = f", drafts {entry['speculative']}" if entry.get("speculative", "none") != "none" else ""
    return (f"embedded model, llama.cpp {build_text(entry.get('llama_cpp_build', '(build not recorded)'))}"
            + (f", {kind}" if kind else "") + workers + drafts
            + (", prompt cache on" if entry.get("prompt_cache") else "")
            + layout + (", every token's logits" if entry.get("logits_all", True) else ""))

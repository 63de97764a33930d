"""Every prompt and reply of a run, kept in its run directory.

With ``RunContext.log_prompts`` (``--log-prompts``), ``RUN_DIR/prompts.jsonl`` gets one JSON object per
request attempt, in the order the replies came (lines kept whole under a lock)::

    {"time": "2026-11-23T23:40:01Z", "role": "generator", "attempt": 1,
     "messages": [{"type": "system", "content": "..."}, ...], "reply": "...",
     "usage": {"generator": {"prompt": 1234, "completion": 567}}, "truncated": false,
     "request": {"kind": "first", "seed": 301, "temperature": 0.8, "n": 3, ...}}

``request`` is what the Generator's requests keep besides their messages
(``loop.requests.GeneratorRequest.label``: kind, seed, temperature, n, stop, edit form, mutation), so a
replay sends what the run sent; other roles' rows have none. One row per reply: a request of ``n`` choices
writes ``n`` rows.

Unusable replies are written too; a request with no reply (endpoint down) is not. No API key is written.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from langchain_core.messages import BaseMessage

from contextevolve.roles import TokenUsage

TRANSCRIPT_FILE = "prompts.jsonl"
_lock = threading.Lock()


def record(run_dir: str | Path, role: str, attempt: int, messages: list[BaseMessage], reply: str,
           usage: TokenUsage, truncated: bool, request: dict | None = None) -> None:
    """Append one request and its reply to ``run_dir``'s transcript (created on first use).

    ``request``: the request's data besides its messages (the module docstring), when it has any.
    """
    row = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "role": role, "attempt": attempt,
           "messages": [{"type": m.type, "content": m.content} for m in messages],
           "reply": reply, "usage": usage, "truncated": truncated}
    if request is not None:
        row["request"] = request
    line = json.dumps(row, ensure_ascii=False)
    path = Path(run_dir) / TRANSCRIPT_FILE
    with _lock:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def read(run_dir: str | Path, limit: int | None = None) -> list[dict]:
    """The rows :func:`record` wrote to ``run_dir``'s transcript, in the order written (at most ``limit``).

    Each is a dict with the keys shown in this module's docstring.

    Raises:
        FileNotFoundError: the run has no transcript (it was not recorded with ``--log-prompts``); the
            message names the file.
    """
    path = Path(run_dir) / TRANSCRIPT_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: record the run with --log-prompts")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:limit]]

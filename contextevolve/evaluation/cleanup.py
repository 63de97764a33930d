"""What an evaluation leaves on the host, removed: its processes, directory and control groups.

An evaluation's processes carry ``CONTEXTEVOLVE_SANDBOX=<token>`` in their environment, its directory is
``$TMPDIR/ce-eval-<token>...`` and its control groups ``ce-<token>``; the token begins with the owner tag
of the evaluating process (:mod:`contextevolve.leftovers`). The host removes its own after every evaluation
(:func:`kill_tagged`, :func:`remove_tree`, ``EvalCgroup.destroy``); :func:`remove_orphans`, run once per
process before its first evaluation, removes those of owners that were SIGKILLed.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from contextevolve.evaluation import cgroups
from contextevolve.leftovers import orphaned, owner_alive, owner_tag

TOKEN_ENV = "CONTEXTEVOLVE_SANDBOX"
"""Environment variable that marks every process of one evaluation."""
DIR_PREFIX = "ce-eval-"
CGROUP_PREFIX = "ce-"

_swept = threading.Event()
_sweeping = threading.Lock()


def new_token() -> str:
    """A fresh evaluation token: ``<owner tag>-<16 hex digits>``."""
    return f"{owner_tag()}-{secrets.token_hex(8)}"


def remove_tree(path: str | Path) -> None:
    """Delete an evaluation's directory, however deep or wide the candidate made it."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:  # Python < 3.12 removes recursively
        try:
            subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False, timeout=300)
        except subprocess.TimeoutExpired:
            pass


def environ_value(pid: str | int, name: str) -> str | None:
    """The value of environment variable ``name`` that process ``pid`` started with, or None.

    Read from ``/proc/PID/environ``; None if it has none or its environment cannot be read.
    """
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read().split(b"\0")
    except OSError:
        return None
    prefix = f"{name}=".encode()
    return next((item[len(prefix):].decode(errors="replace") for item in env if item.startswith(prefix)),
                None)


def _environ_token(pid: str) -> str | None:
    return environ_value(pid, TOKEN_ENV)


def kill_tagged(token: str) -> int:
    """SIGKILL every process whose environment carries ``token``; returns how many signals were sent.

    Those are the leftovers of one evaluation.
    """
    killed = 0
    for _ in range(50):
        found = [pid for pid in os.listdir("/proc") if pid.isdigit() and _environ_token(pid) == token]
        if not found:
            break
        for pid in found:
            try:
                os.kill(int(pid), signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)
    return killed


def remove_orphans() -> dict[str, int]:
    """Once per process: remove what evaluations whose owner is no longer running left behind.

    Kills their processes and removes their directories and control groups. Returns what it tried, by kind
    (all zero after the first call). Never raises: a failed sweep must not fail the evaluation that asked for
    it.
    """
    counts = {"processes": 0, "directories": 0, "cgroups": 0}
    with _sweeping:
        if _swept.is_set():
            return counts
        _swept.set()
        try:
            _sweep(counts)
        except (OSError, ValueError):
            pass
    return counts


def _sweep(counts: dict[str, int]) -> None:
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        token = _environ_token(pid)
        if token and not owner_alive(token.split("-", 1)[0]):
            try:
                os.kill(int(pid), signal.SIGKILL)
                counts["processes"] += 1
            except (ProcessLookupError, PermissionError):
                pass
    for path in orphaned(Path(tempfile.gettempdir()).iterdir(), DIR_PREFIX):
        remove_tree(path)
        counts["directories"] += 1
    for base in cgroups.available().values():
        for path in orphaned((p for p in base.iterdir() if p.is_dir()), CGROUP_PREFIX):
            cgroups.EvalCgroup([path], None).destroy()
            counts["cgroups"] += 1

"""Names that say which process owns a temporary file or control group, so a later process can
remove what a SIGKILLed one left behind.

A process killed with SIGKILL runs no ``finally`` and no ``atexit``: an evaluation's temporary
directory and control groups, or the embedded server's log, stay behind, one per kill, for ever.
Everything of that kind is therefore named ``<prefix><owner>-<rest>``, where ``<owner>`` is
``<pid>.<start time>`` of the creating process (the start time, in clock ticks since boot from
``/proc/<pid>/stat``, tells a live owner from a recycled pid). Anyone may remove an entry whose
owner is no longer running; entries of live owners and names without an owner are never touched,
so runs sharing a machine (and its ``/tmp``) leave each other alone.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

_OWNER = re.compile(r"(\d+)\.(\d+)-")


def _start_time(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot, or None when it is not running."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def owner_tag(pid: int | None = None) -> str:
    """``<pid>.<start time>`` of ``pid`` (default: this process); start time 0 where ``/proc`` is unreadable."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}.{_start_time(pid) or 0}"


def owner_alive(tag: str) -> bool:
    """True when the process that ``tag`` names is still running (a pid reused since counts as dead)."""
    pid, _, start = tag.partition(".")
    if not pid.isdigit():
        return True  # not ours to judge
    now = _start_time(int(pid))
    return now is not None and (start == "0" or now == start)


def orphaned(entries: Iterable[Path], prefix: str) -> list[Path]:
    """The entries named ``<prefix><pid>.<start>-...`` whose owner is no longer running."""
    found = []
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        match = _OWNER.match(entry.name[len(prefix):])
        if match and not owner_alive(f"{match[1]}.{match[2]}"):
            found.append(entry)
    return found

"""Names that say which process owns a temporary file or control group.

With them a later process can remove what a SIGKILLed one left behind (why: docs/architecture.md, *The
evaluation sandbox*). Such an entry is named ``<prefix><owner>-<rest>``, ``<owner>`` being
``<pid>.<start time>.<pid namespace>`` of the creating process: the start time (clock ticks since boot, from
``/proc/<pid>/stat``) tells a live owner from a recycled pid, the namespace's inode number whether that pid
means anything here. An entry whose owner is no longer running may be removed; entries of live owners, of
owners in another pid namespace (a container sharing ``/tmp``) and names without an owner are never touched.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

_OWNER = re.compile(r"(\d+\.\d+\.\d+)-")


def _start_time(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot, or None when it is not running."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def _pid_namespace() -> int:
    """Inode number of this process's pid namespace (0 where ``/proc`` does not tell)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def owner_tag(pid: int | None = None) -> str:
    """``<pid>.<start time>.<pid namespace>`` of ``pid`` (default: this process).

    The namespace is this process's; the start time is 0 where ``/proc`` is unreadable.
    """
    pid = os.getpid() if pid is None else pid
    return f"{pid}.{_start_time(pid) or 0}.{_pid_namespace()}"


def owner_alive(tag: str) -> bool:
    """True unless ``tag`` names a process of this pid namespace that is no longer running.

    A pid reused since counts as gone; a tag we cannot judge (another namespace, not a tag) counts as
    alive.
    """
    parts = tag.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts) or int(parts[2]) != _pid_namespace():
        return True  # not ours to judge
    now = _start_time(int(parts[0]))
    return now is not None and (parts[1] == "0" or now == parts[1])


def orphaned(entries: Iterable[Path], prefix: str) -> list[Path]:
    """The entries named ``<prefix><owner tag>-...`` whose owner is no longer running."""
    found = []
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        match = _OWNER.match(entry.name[len(prefix):])
        if match and not owner_alive(match[1]):
            found.append(entry)
    return found

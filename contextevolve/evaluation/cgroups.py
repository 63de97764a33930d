"""Per-evaluation control groups: a cap on processes (fork bombs) and on the tree's memory.

``RLIMIT_NPROC`` does not bind root, and ``RLIMIT_AS`` is per process, so where the host
lets us create control groups each evaluation gets its own: ``pids.max`` and a memory
limit over the whole process tree. Both cgroup v1 (separate ``pids`` and ``memory``
hierarchies) and v2 (a delegated subtree with the ``pids``/``memory`` controllers enabled,
e.g. a systemd ``Delegate=yes`` unit) are used when writable; otherwise
:func:`available` says so and the sandbox falls back to rlimits (and notes it).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

_ROOT = Path("/sys/fs/cgroup")


def _own_path(hierarchy: str) -> str | None:
    """This process's cgroup path in ``hierarchy`` (a v1 controller name, or "" for v2)."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if (hierarchy == "" and controllers == "") or hierarchy in controllers.split(","):
                return path
    except OSError:
        pass
    return None


def _bases() -> dict[str, Path]:
    """Writable parent directories: {"pids": dir, "memory": dir} (v1) or {"unified": dir} (v2)."""
    bases: dict[str, Path] = {}
    for controller in ("pids", "memory"):
        own = _own_path(controller)
        base = _ROOT / controller / (own or "/").lstrip("/")
        if own is not None and (base / "cgroup.procs").exists() and os.access(base, os.W_OK):
            bases[controller] = base
    if not bases:
        own = _own_path("")
        base = _ROOT / (own or "/").lstrip("/")
        try:
            enabled = (base / "cgroup.subtree_control").read_text().split()
        except OSError:
            enabled = []
        if own is not None and "pids" in enabled and os.access(base, os.W_OK):
            bases["unified"] = base
    return bases


def available() -> dict[str, Path]:
    """Which cgroup controllers we can use here, mapped to their parent directories (may be empty)."""
    return _bases()


@dataclass
class EvalCgroup:
    """The control groups of one evaluation. Create with :func:`create`; always :meth:`destroy`."""

    dirs: list[Path]
    """One directory per hierarchy (the child writes itself into each ``cgroup.procs``)."""
    memory_dir: Path | None
    """Directory holding the memory accounting files, if a memory limit is set."""

    def pids(self) -> set[int]:
        """Processes currently in the group (host pids)."""
        found: set[int] = set()
        for d in self.dirs:
            try:
                # a process outside our pid namespace reads as 0 (cgroup v2): never signal 0, our own group
                found.update(pid for pid in map(int, (d / "cgroup.procs").read_text().split()) if pid > 0)
            except (OSError, ValueError):
                pass
        return found

    def hit_memory_limit(self) -> bool:
        """True when the tree's memory use reached the cgroup limit (v1 failcnt, v2 ``max`` events)."""
        if self.memory_dir is None:
            return False
        try:
            if (self.memory_dir / "memory.failcnt").exists():
                return int((self.memory_dir / "memory.failcnt").read_text()) > 0
            events = dict(line.split()
                          for line in (self.memory_dir / "memory.events").read_text().splitlines())
            return int(events.get("max", 0)) > 0 or int(events.get("oom_kill", 0)) > 0
        except (OSError, ValueError):
            return False

    def destroy(self) -> int:
        """SIGKILL every process in the group until it is empty, then remove it; returns the number killed."""
        killed = 0
        for _ in range(200):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
            time.sleep(0.01)
        for d in self.dirs:
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
        return killed


def create(name: str, *, max_processes: int, memory_bytes: int) -> EvalCgroup | None:
    """New control groups named ``name`` with ``pids.max`` and a memory limit; None if unavailable.

    Raises:
        OSError: a cgroup directory could be created but not configured.
    """
    bases = _bases()
    if not bases:
        return None
    dirs: list[Path] = []
    memory_dir = None

    def make(base: Path, settings: dict[str, str]) -> Path:
        d = base / name
        d.mkdir()
        dirs.append(d)
        for file, value in settings.items():
            if (d / file).exists():
                (d / file).write_text(value)
        return d

    try:
        if "unified" in bases:
            d = make(bases["unified"], {"pids.max": str(max_processes), "memory.max": str(memory_bytes),
                                        "memory.swap.max": "0"})
            memory_dir = d if (d / "memory.max").exists() else None
        else:
            if "pids" in bases:
                make(bases["pids"], {"pids.max": str(max_processes)})
            if "memory" in bases:
                memory_dir = make(bases["memory"], {"memory.limit_in_bytes": str(memory_bytes)})
    except OSError:
        EvalCgroup(dirs, None).destroy()
        raise
    return EvalCgroup(dirs, memory_dir)

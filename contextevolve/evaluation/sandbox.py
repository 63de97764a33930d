"""What this host can enforce, probed once per process, and the notes for what it cannot.

:func:`host_sandbox` finds which layers this host allows (bubblewrap or ``unshare`` namespaces, Landlock,
cgroups); each guarantee uses the strongest one available, and one the host cannot enforce becomes a note
in :attr:`HostSandbox.notes` (layers: docs/sandbox.md; what each guarantee falls back to, and why:
docs/decisions/sandbox-fallbacks.md). ``CONTEXTEVOLVE_NO_NAMESPACES=1`` turns every namespace off and
``CONTEXTEVOLVE_NO_BWRAP=1`` only bubblewrap (the ``unshare`` fallback is used), to see such hosts' notes.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from contextevolve.evaluation import cgroups, landlock

#: Flags of either prefix that create the network namespace (dropped when the network is allowed).
_NETWORK_FLAGS = ("--net", "--unshare-net")
#: Top-level system directories (or their merged-/usr symlinks) the interpreter and its libraries need.
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Files under /etc the dynamic loader, time zones, ``pwd`` and Debian's alternatives need (no secrets).
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/timezone",
        "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/alternatives", "/etc/mime.types")
#: More of /etc where the candidate may use the network (name resolution, certificates).
_ETC_NETWORK = ("/etc/resolv.conf", "/etc/hosts", "/etc/host.conf", "/etc/gai.conf", "/etc/services",
                "/etc/protocols", "/etc/ssl", "/etc/ca-certificates", "/etc/pki")
#: CPU topology, read by torch / OpenBLAS thread pools (read-only; no secrets).
_SYS = ("/sys/devices/system/cpu", "/sys/devices/system/node")


@dataclass(frozen=True)
class HostSandbox:
    """The sandbox this host supports (see :func:`host_sandbox`)."""

    namespace_prefix: tuple[str, ...]
    """Command prefix that starts the child in its namespaces (empty if not permitted): bubblewrap's
    (new PID, network, IPC and mount namespaces, the fixed part of its file-system view) when
    :attr:`mount_namespace`, else util-linux ``unshare``'s."""
    landlock_abi: int
    """Landlock ABI version (0 = unavailable)."""
    cgroups: bool
    """Whether per-evaluation control groups can be created."""
    notes: tuple[str, ...] = field(default=())
    """Human-readable limits that are NOT enforced here, with why."""
    mount_namespace: bool = False
    """Whether ``namespace_prefix`` is bubblewrap's: the child sees only what :meth:`command` binds."""

    def notes_for(self, allow_network: bool) -> list[str]:
        """Notes relevant to one evaluation (network notes dropped when the network is allowed anyway)."""
        return [n for n in self.notes if not (allow_network and n.startswith("network"))]

    def command(self, argv: Sequence[str], *, work: str | os.PathLike, lib: str | os.PathLike,
                writable: Sequence[str | os.PathLike] = (), allow_network: bool = False) -> list[str]:
        """``argv`` started inside this host's namespaces.

        With bubblewrap the child's file system holds only the interpreter and system
        libraries (read-only), ``lib`` (read-only), ``work`` and the ``writable`` paths (e.g.
        the evaluation's cgroup directories; read-write), a private ``/tmp``, ``/proc`` and a
        minimal ``/dev``; it starts in ``work``. ``allow_network`` keeps the host's network
        (and, with bubblewrap, its name-resolution files).
        """
        prefix = [a for a in self.namespace_prefix if not (allow_network and a in _NETWORK_FLAGS)]
        if not self.mount_namespace:
            return [*prefix, *argv]
        mounts: list[str] = []
        if allow_network:
            for path in _ETC_NETWORK:
                mounts += ["--ro-bind-try", path, path]
        mounts += ["--ro-bind", str(lib), str(lib), "--bind", str(work), str(work)]
        for path in writable:
            mounts += ["--bind", str(path), str(path)]
        return [*prefix, *mounts, "--chdir", str(work), "--", *argv]


def _try(cmd: list[str]) -> str | None:
    """None if ``cmd`` succeeds, else the reason it did not."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    return None if proc.returncode == 0 else (proc.stderr.strip().splitlines()
                                              or [f"exit {proc.returncode}"])[-1]


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _interpreter_roots() -> list[str]:
    """Directories holding the interpreter, its standard library and installed packages.

    As spelled and resolved, outermost only, minus those already under a system directory.
    """
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable))}
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        paths.add(sysconfig.get_paths().get(name, ""))
    found = set()
    for path in filter(None, paths):
        for spelling in (os.path.abspath(path), os.path.realpath(path)):
            if os.path.isdir(spelling):
                found.add(spelling)
    roots = sorted(found, key=len)
    outer = [r for i, r in enumerate(roots) if not any(_inside(r, o) for o in roots[:i])]
    return [r for r in outer if r != "/" and not any(_inside(r, s) for s in _SYSTEM_DIRS)]


def _hidden() -> list[str]:
    """Paths never to show the candidate even where a bound directory holds them.

    This package's source tree (graders, data generators), the task-data cache and the home directory.
    """
    package = str(Path(__file__).resolve().parents[1])
    home = os.path.expanduser("~")
    data = os.environ.get("CONTEXTEVOLVE_DATA_DIR") or os.path.join(home, ".cache", "contextevolve")
    return [package, os.path.realpath(data), os.path.realpath(home)]


def _bwrap_prefix(bwrap: str) -> list[str]:
    """Bubblewrap's fixed arguments: the namespaces and the read-only system part of the view."""
    args = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
            "--cap-drop", "ALL",
            # first: later mounts go on top, so an interpreter (or the evaluation's directory) under /tmp
            # stays visible through the private /tmp
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for top in _SYSTEM_DIRS:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for path in _ETC:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    roots = _interpreter_roots()
    for root in roots:
        args += ["--ro-bind", root, root]
    for hidden in _hidden():
        if os.path.isdir(hidden) and any(_inside(hidden, r) and hidden != r for r in [*roots, *_SYSTEM_DIRS]):
            args += ["--tmpfs", hidden]  # an empty directory over it
            for root in roots:  # an interpreter directory inside it stays visible
                if _inside(root, hidden) and root != hidden:
                    args += ["--ro-bind", root, root]
    for path in _SYS:
        args += ["--ro-bind-try", path, path]
    return args


def _probe_bwrap() -> tuple[tuple[str, ...], str]:
    """Bubblewrap's prefix, or () and why it cannot be used."""
    if os.environ.get("CONTEXTEVOLVE_NO_BWRAP"):
        return (), "disabled by CONTEXTEVOLVE_NO_BWRAP"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return (), "bubblewrap not installed"
    prefix = _bwrap_prefix(bwrap)
    # the interpreter must start in that view, and an inherited descriptor must reach it
    read, write = os.pipe()
    try:
        check = f"import os; os.write({write}, b'ok')"
        proc = subprocess.run([*prefix, "--", sys.executable, "-S", "-c", check], capture_output=True,
                              text=True, timeout=20, stdin=subprocess.DEVNULL, pass_fds=(write,))
        os.close(write)
        write = -1
        got = os.read(read, 2) if proc.returncode == 0 else b""
        why = "" if got == b"ok" else "bubblewrap failed: " + (
            (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:200])
    except (OSError, subprocess.SubprocessError) as exc:
        why = f"bubblewrap failed: {exc}"
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)
    return (tuple(prefix), "") if not why else ((), why)


def _probe_unshare() -> tuple[tuple[str, ...], list[str], str]:
    """util-linux ``unshare``'s prefix, the layers it lacks (``"ipc"``, ``"proc"``), or () and why none."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return (), [], "the unshare command (util-linux) is not installed"
    base = [unshare, "--net", "--pid", "--fork", "--kill-child"]
    if os.geteuid() != 0:
        base.append("--map-root-user")
    why = ""
    for extra, missing in ((["--ipc", "--mount-proc"], []), (["--ipc"], ["proc"]), ([], ["ipc", "proc"])):
        reason = _try(base + extra + ["true"])
        if reason is None:
            return tuple(base + extra), missing, why
        why = why or reason
    return (), [], why


@functools.cache
def host_sandbox() -> HostSandbox:
    """Probe namespaces (bubblewrap first, then ``unshare``), Landlock and cgroups once per process."""
    notes: list[str] = []
    missing = ["ipc", "proc"]  # layers the unshare fallback could not add
    if os.environ.get("CONTEXTEVOLVE_NO_NAMESPACES"):
        prefix, why = (), "disabled by CONTEXTEVOLVE_NO_NAMESPACES"
        mount_why = why
    else:
        prefix, mount_why = _probe_bwrap()
        why = ""
        if prefix:
            missing = []
        else:
            prefix, missing, why = _probe_unshare()
            missing = missing if prefix else ["ipc", "proc"]
    abi = landlock.abi_version()
    if not prefix:
        notes.append(f"network namespace unavailable ({why}): "
                     + ("only TCP is blocked (Landlock)" if abi >= 4 else "network access is NOT blocked"))
        notes.append(f"no PID namespace ({why}): leftover processes are found by process group and "
                     "environment token only")
    if mount_why:
        notes.append(f"files readable: no mount namespace ({mount_why}): the candidate can read every file "
                     "this user can (home directory, task data, run directories, this package's source, "
                     "/tmp) and connect to the host's pathname UNIX sockets")
    if "proc" in missing:
        notes.append(f"host processes visible: no private /proc ({why or mount_why}): "
                     "the command lines of the host's processes are readable")
    if "ipc" in missing:
        notes.append(f"SysV IPC shared with the host: no IPC namespace ({why or mount_why})")
    if abi < 1:
        notes.append("Landlock unavailable: writes outside the working directory are NOT blocked")
    elif abi < 6 and not prefix:
        notes.append(f"Landlock ABI {abi} < 6: signals to processes outside the sandbox are NOT blocked")
    usable = bool(cgroups.available())
    if not usable:
        notes.append("no writable cgroup: memory is capped per process only"
                     + ("; the process count is NOT capped (root ignores RLIMIT_NPROC)" if os.geteuid() == 0
                        else ""))
    return HostSandbox(prefix, abi, usable, tuple(notes), mount_namespace=not mount_why)

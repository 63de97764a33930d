"""What this host can enforce, probed once per process, and the notes for what it cannot.

Layers, each used when the host allows it (see the README's *Sandbox* section):

=========================  ======================================================  ============================
guarantee                  mechanism                                               without it
=========================  ======================================================  ============================
wall-clock limit           host kills the process group / PID namespace            (always)
CPU-time limit             ``RLIMIT_CPU`` (SIGXCPU, then SIGKILL)                  (always)
memory cap                 ``RLIMIT_AS`` per process; memory cgroup for the tree   per process only
process cap (fork bomb)    pids cgroup; ``RLIMIT_NPROC`` (ignored for root)        note
stdout/stderr/file caps    host polls sizes; ``RLIMIT_FSIZE`` per file             (always)
no orphans                 PID namespace (its init's death kills all); cgroup      process group + env-token sweep
                           sweep; process group; env-token sweep
no network                 new network namespace (``unshare --net``); Landlock     note
                           TCP rules (ABI 4)
writes only in own dir     Landlock file-system rules                              note
no signals/ptrace outside  Landlock scope (ABI 6) + ptrace rules; PID namespace;   note
                           capabilities dropped
secrets                    environment rebuilt from an allow-list                  (always)
=========================  ======================================================  ============================
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass, field

from contextevolve.evaluation import cgroups, landlock


@dataclass(frozen=True)
class HostSandbox:
    """The sandbox this host supports (see :func:`host_sandbox`)."""

    namespace_prefix: tuple[str, ...]
    """Command prefix that starts the child in new network + PID namespaces (empty if not permitted)."""
    landlock_abi: int
    """Landlock ABI version (0 = unavailable)."""
    cgroups: bool
    """Whether per-evaluation control groups can be created."""
    notes: tuple[str, ...] = field(default=())
    """Human-readable limits that are NOT enforced here, with why."""

    def notes_for(self, allow_network: bool) -> list[str]:
        """Notes relevant to one evaluation (network notes dropped when the network is allowed anyway)."""
        return [n for n in self.notes if not (allow_network and n.startswith("network"))]


def _try(cmd: list[str]) -> str | None:
    """None if ``cmd`` succeeds, else the reason it did not."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    return None if proc.returncode == 0 else (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]


@functools.cache
def host_sandbox() -> HostSandbox:
    """Probe namespaces, Landlock and cgroups once; cached for the process."""
    notes: list[str] = []
    unshare = shutil.which("unshare")
    prefix: tuple[str, ...] = ()
    if os.environ.get("CONTEXTEVOLVE_NO_NAMESPACES"):
        why = "disabled by CONTEXTEVOLVE_NO_NAMESPACES"
    elif unshare is None:
        why = "the unshare command (util-linux) is not installed"
    else:
        candidate = [unshare, "--net", "--pid", "--fork", "--kill-child"]
        if os.geteuid() != 0:
            candidate.append("--map-root-user")
        why = _try(candidate + ["true"])
        if why is None:
            prefix = tuple(candidate)
    abi = landlock.abi_version()
    if not prefix:
        notes.append(f"network namespace unavailable ({why}): "
                     + ("only TCP is blocked (Landlock)" if abi >= 4 else "network access is NOT blocked"))
        notes.append(f"no PID namespace ({why}): leftover processes are found by process group and "
                     "environment token only")
    if abi < 1:
        notes.append("Landlock unavailable: writes outside the working directory are NOT blocked")
    elif abi < 6 and not prefix:
        notes.append(f"Landlock ABI {abi} < 6: signals to processes outside the sandbox are NOT blocked")
    usable = bool(cgroups.available())
    if not usable:
        notes.append("no writable cgroup: memory is capped per process only"
                     + ("; the process count is NOT capped (root ignores RLIMIT_NPROC)" if os.geteuid() == 0
                        else ""))
    return HostSandbox(prefix, abi, usable, tuple(notes))

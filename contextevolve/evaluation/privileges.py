"""Drop every Linux capability of the calling process, for good (before running untrusted code).

A process running as root — or as root of a user namespace — keeps capabilities such as
``CAP_SYS_PTRACE`` (read any process's environment), ``CAP_KILL``, ``CAP_SYS_ADMIN`` or
``CAP_DAC_OVERRIDE`` that would let a candidate step around the other sandbox layers.
We empty the bounding set (so an ``execve`` cannot regain them) and then the effective,
permitted and inheritable sets (``capset(2)``, header version 3 = 0x20080522).
"""

from __future__ import annotations

import ctypes
import os

_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_CAP_LAST_CAP = 63


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def effective_capabilities() -> int:
    """The ``CapEff`` mask of this process (0 when it holds none or /proc is unreadable)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def drop_all() -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable capability sets.

    Raises:
        OSError: ``capset`` failed (the process keeps capabilities; do not run the candidate).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(_CAP_LAST_CAP + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the kernel's last cap: fine
    header = _Header(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_Data * 2)()
    if libc.capset(ctypes.byref(header), data):
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")
    if effective_capabilities():
        raise OSError("capabilities still effective after capset")

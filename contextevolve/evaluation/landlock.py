"""Landlock (Linux >= 5.13) through raw system calls: confine a process's writes, TCP and signals.

Landlock is an unprivileged, stackable Linux security module: a process restricts itself and every process
it later starts, irrevocably. Three guarantees, by ABI version (``include/uapi/linux/landlock.h``): writes
only beneath the working directory (ABI 1; ``REFER`` 2, ``TRUNCATE`` 3, ``IOCTL_DEV`` 5; reads stay
allowed), which also bars ptrace of (so ``/proc/PID/environ`` of) processes outside; no TCP bind or
connect (ABI 4); no signals to, or abstract UNIX sockets of, processes outside (ABI 6). The syscall numbers
(444-446) are those of x86-64 and aarch64.
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Iterable

_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Access rights on files (bit numbers from landlock.h) and the ABI that introduced them.
WRITE_FILE, REMOVE_DIR, REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
MAKE_CHAR, MAKE_DIR, MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = (1 << n for n in range(6, 13))
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

_FILE_ONLY = WRITE_FILE | TRUNCATE | IOCTL_DEV


class LandlockError(OSError):
    """Landlock is unavailable or a system call failed (``errno`` set)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing, disabled, or not Linux."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    version = _libc().syscall(_SYS_CREATE, None, ctypes.c_size_t(0),
                              ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(0, int(version))


def _write_rights(abi: int) -> int:
    rights = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO \
        | MAKE_BLOCK | MAKE_SYM
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def restrict_self(writable_dirs: Iterable[str], writable_files: Iterable[str] = (), *,
                  deny_tcp: bool = True, scope_signals: bool = True) -> int:
    """Confine the calling process (and its future children) for good.

    Args:
        writable_dirs: directories beneath which writes stay allowed.
        writable_files: single files that stay writable (e.g. ``/dev/null``).
        deny_tcp: forbid TCP bind and connect (needs ABI >= 4; silently skipped below).
        scope_signals: forbid signals and abstract UNIX sockets across the domain boundary
            (needs ABI >= 6; skipped below).

    Returns:
        The ABI version used.

    Raises:
        LandlockError: Landlock is unavailable or a system call failed.
    """
    abi = abi_version()
    if abi < 1:
        raise LandlockError("Landlock is not available in this kernel")
    libc = _libc()
    rights = _write_rights(abi)
    attr = _RulesetAttr(rights, NET_BIND_TCP | NET_CONNECT_TCP if deny_tcp and abi >= 4 else 0,
                        SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET if scope_signals and abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    fd = libc.syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise LandlockError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        for path, allowed in [(p, rights) for p in writable_dirs] + [(p, rights & _FILE_ONLY)
                                                                   for p in writable_files]:
            target = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneathAttr(allowed, target)
                if libc.syscall(_SYS_ADD_RULE, fd, _RULE_PATH_BENEATH, ctypes.byref(rule),
                                ctypes.c_uint32(0)):
                    raise LandlockError(ctypes.get_errno(), f"landlock_add_rule({path}): "
                                        f"{os.strerror(ctypes.get_errno())}")
            finally:
                os.close(target)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
            raise LandlockError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_SYS_RESTRICT, fd, ctypes.c_uint32(0)):
            raise LandlockError(ctypes.get_errno(),
                                f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)
    return abi

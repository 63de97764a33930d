"""What the candidate wrote, as the host measures it while the candidate runs.

The size of its working tree (bounded in entries, so a flood of empty files cannot stall the host) and
the tail of its captured output.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Characters of captured stdout/stderr kept for diagnostics.
OUTPUT_TAIL = 2000
#: Files and directories the candidate may create in its working directory.
MAX_ENTRIES = 10_000


def size(path: Path) -> int:
    """Bytes of the file at ``path``; 0 when it cannot be read."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def tree_size(root: Path) -> int:
    """Bytes of regular files under ``root`` (iterative: any depth).

    Raises:
        TooManyEntries: more than :data:`MAX_ENTRIES` files and directories.
    """
    total, entries, stack = 0, 0, [str(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as listing:
                for entry in listing:
                    entries += 1
                    if entries > MAX_ENTRIES:
                        raise TooManyEntries()
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        pass
        except OSError:
            pass
    return total


class TooManyEntries(Exception):
    """The candidate created more files and directories than :data:`MAX_ENTRIES`."""


def tail(path: Path) -> str:
    """The last :data:`OUTPUT_TAIL` bytes of the file at ``path``, decoded; empty when it cannot be read.

    Undecodable bytes are replaced.
    """
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - OUTPUT_TAIL))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""

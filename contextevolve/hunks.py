"""Salvage: the largest part of a failed child's change that still passes the pre-checks.

Issue 10 measured where the embedded model's children fail: one broken piece (an invented
name, an index off by one, a helper it forgot to write) sinks a child whose other changes were
fine, and asked to repair it the model often gives the same error back or the parent unchanged.
Salvage needs no model. It splits the child's difference from its parent into hunks (runs of
changed lines, ``difflib.SequenceMatcher`` over lines) and searches for a large set of them that,
applied to the parent, passes a check — in the spirit of delta debugging (Zeller and
Hildebrandt, "Simplifying and isolating failure-inducing input", TSE 2002), but keeping the
passing part instead of isolating the failing one:

1. leave one out: every hunk but one, for each hunk in turn (the child minus its one bad piece);
2. else grow greedily: hunks added in order while the program still passes, repeated over the
   hunks left out until a pass adds none (a hunk that needs a later one gets a second chance).

Two checks decide: ``cheap`` (compiles, has the entry function, is no twin of a known program)
runs on every candidate; ``costly`` (the sandboxed smoke run) only on those that pass it, at
most ``budget`` times. The empty set (the parent) and the full set (the failed child) are never
candidates. OpenEvolve similarly applies those SEARCH/REPLACE blocks of a reply that match and
drops the others; this goes further, by what the program does.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

MAX_HUNKS = 8
"""Hunks searched at most; beyond this the two closest neighbours are merged, repeatedly."""
SALVAGE_CHECKS = 12
"""Default budget of costly checks (smoke runs, 0.1-1.3 s each on this machine) per failed version."""

Hunk = tuple[int, int, int, int]
"""Line ranges ``(i1, i2, j1, j2)``: parent lines ``[i1, i2)`` become the version's lines ``[j1, j2)``."""


def hunks(parent: str, version: str, most: int = MAX_HUNKS) -> list[Hunk]:
    """The changed regions between ``parent`` and ``version``, in order, at most ``most`` of them.

    A run of lines replaced by as many lines is split line for line (an edited constant next to an
    edited call are two hunks); beyond ``most``, the pair with the fewest unchanged lines between
    them is merged, repeatedly."""
    a, b = parent.splitlines(keepends=True), version.splitlines(keepends=True)
    found: list[Hunk] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "replace" and i2 - i1 == j2 - j1:  # line for line: each line its own hunk
            found += [(i1 + n, i1 + n + 1, j1 + n, j1 + n + 1) for n in range(i2 - i1)]
        elif tag != "equal":
            found.append((i1, i2, j1, j2))
    while len(found) > most:
        k = min(range(len(found) - 1), key=lambda n: found[n + 1][0] - found[n][1])
        first, second = found[k], found[k + 1]
        found[k:k + 2] = [(first[0], second[1], first[2], second[3])]
    return found


def apply_hunks(parent: str, version: str, found: list[Hunk], keep: frozenset[int]) -> str:
    """``parent`` with the hunks whose index is in ``keep`` taken from ``version``."""
    a, b = parent.splitlines(keepends=True), version.splitlines(keepends=True)
    out, at = [], 0
    for n, (i1, i2, j1, j2) in enumerate(found):
        out += a[at:i1]
        out += b[j1:j2] if n in keep else a[i1:i2]
        at = i2
    return "".join(out + a[at:])


def salvage(parent: str, version: str, cheap: Callable[[str], bool], costly: Callable[[str], bool],
            budget: int = SALVAGE_CHECKS) -> tuple[str | None, int, int]:
    """The largest part of ``version``'s change to ``parent`` found that passes both checks.

    Args:
        parent: the parent's source.
        version: a failed version of the child (its change is the material).
        cheap: a check run on every candidate (no sandbox), True when it passes.
        costly: a check run only on candidates ``cheap`` passed, at most ``budget`` times.
        budget: most calls of ``costly``.
    Returns:
        ``(source, kept, total)``: the salvaged program (None when no candidate passed), the hunks it
        keeps and the hunks the change had. Never raises for what the checks reject.
    """
    found = hunks(parent, version)
    total = len(found)
    if total < 2:  # one hunk: all of it failed, none of it is the parent
        return None, 0, total
    tried: dict[frozenset[int], bool] = {}
    spent = 0

    def passes(keep: frozenset[int]) -> bool:
        nonlocal spent
        if keep in tried:
            return tried[keep]
        if not keep or len(keep) == total or spent >= budget:
            return False
        source = apply_hunks(parent, version, found, keep)
        ok = cheap(source)
        if ok:
            spent += 1
            ok = costly(source)
        tried[keep] = ok
        return ok

    everything = frozenset(range(total))
    for n in range(total):
        if passes(everything - {n}):
            return apply_hunks(parent, version, found, everything - {n}), total - 1, total
    keep: frozenset[int] = frozenset()
    grew = True
    while grew and spent < budget:
        grew = False
        for n in range(total):
            if n not in keep and passes(keep | {n}):
                keep, grew = keep | {n}, True
    if not keep:
        return None, 0, total
    return apply_hunks(parent, version, found, keep), len(keep), total

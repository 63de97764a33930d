"""The concrete changes an ask after a twin names: one per ask, in turn by seed and iteration.

The list is a run setting (``SearchSettings.mutations``), so it lives below the settings.
"""

from __future__ import annotations

MUTATIONS: tuple[str, ...] = (
    "change the order in which the items are considered (sort them by another key, or reverse the order)",
    "change the rule that picks among candidates that are equally good (the tie-break)",
    "after the solution is built, add a pass that moves or swaps single items while that improves the score",
    "base the decision on another of the values the program reads from its inputs, or on a formula that "
    "combines two of them",
    "change the quantity the greedy choice minimises or maximises to take one more factor into account",
    "change a numeric constant, limit or threshold the algorithm uses",
)
"""Generic, behaviour-changing edits named in the second ask after a twin: a small model told only
"change the algorithm" mostly rewrites docstrings, while one named mutation gives it a concrete edit to
make (docs/decisions/second-ask.md). Each applies to any of the five tasks and to a one-line policy such as
the cache-eviction example's (rank the keys by one field), which is why the fourth names what the program
decides by rather than building several solutions (docs/decisions/second-ask-mutations.md)."""


def mutation_for(seed: int, iteration: int, mutations: tuple[str, ...] = MUTATIONS) -> str:
    """The mutation of ``mutations`` named in the re-ask of ``iteration`` (deterministic in all three).

    The ``(seed + iteration)``-th entry, counted round.
    """
    return mutations[(seed + iteration) % len(mutations)]

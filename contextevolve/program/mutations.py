"""The concrete changes an ask after a twin names: one per ask, in turn by seed and iteration.

The list is a run setting (``SearchSettings.mutations``), so it lives below the settings. With
``SearchSettings.mutation_choice`` ``history`` the turn only breaks ties between the entries the run's own
children rate best (:func:`mutation_odds`).
"""

from __future__ import annotations

from collections.abc import Iterable

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


def mutation_odds(outcomes: Iterable[tuple[str, bool]], mutations: tuple[str, ...]) -> tuple[float, ...]:
    """How often each of ``mutations`` made a better child so far: ``(better + 1) / (named + 2)`` per entry.

    ``outcomes`` holds one ``(mutation, better)`` pair per finished child whose last ask after a twin named
    ``mutation``; pairs naming a change outside the list are ignored. The ratio is Laplace's rule of
    succession (the mean of a Beta(1, 1) prior updated by the outcomes): an entry never named rates 1/2, one
    that failed once 1/3, one that worked once 2/3, so untried entries come before failed ones and an entry
    that worked is named again. Returns one ratio per entry of ``mutations``, in its order.
    """
    named = dict.fromkeys(mutations, 0)
    better = dict.fromkeys(mutations, 0)
    for mutation, won in outcomes:
        if mutation in named:
            named[mutation] += 1
            better[mutation] += bool(won)
    return tuple((better[m] + 1) / (named[m] + 2) for m in mutations)


def mutation_for(seed: int, iteration: int, mutations: tuple[str, ...] = MUTATIONS,
                 odds: tuple[float, ...] = ()) -> str:
    """The mutation of ``mutations`` named in the re-ask of ``iteration`` (deterministic in all four).

    Without ``odds``, the ``(seed + iteration)``-th entry, counted round. With ``odds`` (one per entry,
    :func:`mutation_odds`), the entry of the highest odds; of several tied, the first met counting round from
    that same entry, so a run with no history names what it would without.

    Raises:
        ValueError: ``odds`` is given with another length than ``mutations``.
    """
    start = (seed + iteration) % len(mutations)
    if not odds:
        return mutations[start]
    if len(odds) != len(mutations):
        raise ValueError(f"{len(odds)} odds for {len(mutations)} mutations")
    turn = [(start + k) % len(mutations) for k in range(len(mutations))]  # from the turn's entry, round
    return mutations[max(turn, key=lambda i: odds[i])]  # max keeps the first of equal odds

"""How likely each system of a comparison cell is to reach a score within its token budget, from stored runs.

Reads the ``results.json`` of one or more ``contextevolve compare`` folders on the same task and, for a
target score (``--target``; default the best score any stored run reached), prints per system (seeds and
folders pooled; a variant ``contextevolve+NAME`` is a system of its own; ``--lower-is-better`` for a task
whose score improves downwards):

* runs, and how many reached the target within the budget (``--budget``; default the comparison's token
  budget): a candidate counts when its cumulative tokens are at most the budget;
* candidates per run within the budget (the volume a budget buys);
* the hazard: runs that reached the target / candidates evaluated until they did (all a run's candidates
  within the budget when it never did), the maximum-likelihood per-candidate chance under a geometric
  model, where every candidate is an independent try with the same chance;
* ``P(reach)``: ``1 - (1 - hazard) ** N`` at the system's mean candidates per run ``N``, and the
  candidates a run would need for ``--confidence`` (default 0.9).

The model is the simplest that fits what the stored rows hold (one number per candidate); it ignores that
a search's later candidates depend on its earlier ones. With a handful of runs per system, a hazard rests on
a few events: the figures say which bar a cell sets, not a system's true odds.

Usage:
    python benchmarks/cell_odds.py docs/compare-runs/cache_eviction-40k \
        docs/compare-runs/cache_eviction-40k-seeds2-3 [--target 0.418933] [--budget 40000]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contextevolve.compare.results import best_within
from contextevolve.compare.schema import SystemResult

TOLERANCE = 1e-6
"""A run reaches the target when its best score is within this of it (scores are stored as floats)."""


@dataclass
class Run:
    """One stored run of one system on one seed, cut at the budget."""

    system: str
    label: str
    scores: list[float | None]
    """Best score after each candidate evaluated within the budget (None: no valid program yet)."""


def load_runs(folders: list[Path], budget: int | None) -> tuple[list[Run], int | None, str]:
    """The runs stored in ``folders``' results.json, each cut at ``budget`` tokens (default: the folders').

    The same label in several folders (a copied comparison) is read once, from the first folder holding it.

    Returns:
        The runs, the budget applied (None: none) and the task the folders compare (a user's problem: the
        digest of its files, as ``compare`` matches stored results).

    Raises:
        ValueError: a folder has no results.json, the folders compare different tasks, or they ran under
            different token budgets and ``budget`` is None.
    """
    runs, seen, tasks, budgets = [], set(), set(), set()
    for folder in folders:
        path = folder / "results.json"
        if not path.is_file():
            raise ValueError(f"{folder} holds no results.json (not a compare folder)")
        data = json.loads(path.read_text())
        settings = data["settings"]  # a user's problem is named by its folder's path: its digest is the task
        tasks.add(settings.get("problem_digest") or settings.get("task"))
        budgets.add(settings.get("token_budget"))
        for row in map(SystemResult.model_validate, data["results"]):
            if row.label not in seen:
                seen.add(row.label)
                runs.append(row)
    if len(tasks) > 1:
        raise ValueError(f"the folders compare different tasks: {sorted(map(str, tasks))}")
    if budget is None and len(budgets) > 1:
        raise ValueError(f"the folders ran under different token budgets {sorted(map(str, budgets))}: "
                         "give --budget")
    applied = budget if budget is not None else budgets.pop()
    cut = []
    for row in runs:  # the cut compare's own tables make (kept whole where tokens and scores do not line up)
        within = best_within(row, applied)[1] if applied is not None else None
        cut.append(Run(system=row.system, label=row.label, scores=row.best_so_far[:within]))
    return cut, applied, tasks.pop()


def reached_at(run: Run, target: float, higher_is_better: bool = True) -> int | None:
    """The 1-based candidate at which ``run`` first reached ``target``, else None."""
    for n, score in enumerate(run.scores, 1):
        if score is not None and (score >= target - TOLERANCE if higher_is_better
                                  else score <= target + TOLERANCE):
            return n
    return None


def odds(runs: list[Run], target: float, confidence: float = 0.9, higher_is_better: bool = True) -> dict:
    """One system's figures over ``runs`` (see the module docstring); ``hazard`` None without candidates.

    Raises:
        ValueError: ``confidence`` is not strictly between 0 and 1.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, not {confidence}")
    hits = [reached_at(r, target, higher_is_better) for r in runs]
    exposure = sum(h if h is not None else len(r.scores) for r, h in zip(runs, hits, strict=True))
    reached = sum(h is not None for h in hits)
    mean_n = sum(len(r.scores) for r in runs) / len(runs)
    hazard = reached / exposure if exposure else None
    p_reach = 1 - (1 - hazard) ** mean_n if hazard is not None else None
    needed = (None if not hazard else 1 if hazard >= 1
              else math.ceil(math.log(1 - confidence) / math.log(1 - hazard)))
    return {"runs": len(runs), "reached": reached, "reached_at": hits, "candidates": mean_n,
            "exposure": exposure, "hazard": hazard, "p_reach": p_reach, "needed": needed}


def table(runs: list[Run], target: float, confidence: float = 0.9, higher_is_better: bool = True) -> str:
    """A markdown table of :func:`odds` per system, in the order the systems first appear."""
    by_system: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_system[run.system].append(run)
    lines = [f"| system | runs | reached | reached at candidate | candidates / run | hazard | P(reach) "
             f"| candidates for {confidence:g} |", "|---|---|---|---|---|---|---|---|"]
    for system, own in by_system.items():
        o = odds(own, target, confidence, higher_is_better)
        at = ", ".join("-" if h is None else str(h) for h in o["reached_at"])
        hazard = "-" if o["hazard"] is None else f"{o['hazard']:.3f} ({o['reached']}/{o['exposure']})"
        p = "-" if o["p_reach"] is None else f"{o['p_reach']:.2f}"
        lines.append(f"| {system} | {o['runs']} | {o['reached']} | {at} | {o['candidates']:.1f} | {hazard} "
                     f"| {p} | {o['needed'] if o['needed'] is not None else '-'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the table for the folders given; exit 2 naming the problem on bad input."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="contextevolve compare --out folders")
    parser.add_argument("--target", type=float, help="score to reach (default: the best any run reached)")
    parser.add_argument("--budget", type=int, help="token budget (default: the comparison's)")
    parser.add_argument("--confidence", type=float, default=0.9,
                        help="chance of reaching the target a run should have (default 0.9)")
    parser.add_argument("--lower-is-better", action="store_true",
                        help="the task's score improves downwards (a target is reached at or below it)")
    args = parser.parse_args(argv)
    try:
        runs, budget, task = load_runs(args.folders, args.budget)
        scored = [s for r in runs for s in r.scores if s is not None]
        best = min if args.lower_is_better else max
        target = args.target if args.target is not None else best(scored, default=None)
        if target is None:
            raise ValueError("no stored run evaluated a candidate: nothing to reach")
        print(f"task {task}; target {target:.6g}; budget {budget if budget is not None else 'none'} tokens; "
              f"{len(runs)} runs")
        print(table(runs, target, args.confidence, not args.lower_is_better))
    except ValueError as exc:
        print(f"cell_odds: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

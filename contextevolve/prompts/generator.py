"""Generator prompt: parent code + guidance g + exemplars → child (paper Eq. 2 with Φ = (z_p, g, E))."""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.messages import HumanMessage, SystemMessage

SYSTEM_FULL = ("You are an expert systems programmer improving a program in an evolutionary search. Reply with "
               "the complete improved program in a single ```python code block, then nothing else.")
EDIT_FORMAT = ("Write each edit in this exact format; the SEARCH lines must be copied character for character "
               "from the current program (the lines below are only an example of the shape):\n"
               "<<<<<<< SEARCH\n    for item in items:\n        total += item.size\n=======\n"
               "    for item in sorted(items, key=lambda it: it.size):\n        total += item.size\n"
               ">>>>>>> REPLACE")
"""How to write SEARCH/REPLACE edits, shared by the Generator, its second ask and the repair prompt. A
concrete example: with a placeholder ("lines copied from the program") in its place the embedded model
copied the placeholder itself as its SEARCH text (issue 10)."""
SYSTEM_DIFF = ("You are an expert systems programmer improving a program in an evolutionary search. Reply only "
               "with one or more SEARCH/REPLACE edits. " + EDIT_FORMAT)


MUTATIONS: tuple[str, ...] = (
    "change the order in which the items are considered (sort them by another key, or reverse the order)",
    "change the rule that picks among candidates that are equally good (the tie-break)",
    "after the solution is built, add a pass that moves or swaps single items while that improves the score",
    "build several candidate solutions (for example from different orders) and keep the best one",
    "change the quantity the greedy choice minimises or maximises to take one more factor into account",
    "change a numeric constant, limit or threshold the algorithm uses",
)
"""Generic, behaviour-changing edits named in the second ask after a twin: a small model told only
"change the algorithm" mostly rewrites docstrings (measured in issue 10: 5 of 8 children were copies),
while one named mutation gives it a concrete edit to make. Each applies to any of the five tasks."""


def mutation_for(seed: int, iteration: int) -> str:
    """The mutation named in the re-ask of ``iteration`` (deterministic in ``seed`` and ``iteration``)."""
    return MUTATIONS[(seed + iteration) % len(MUTATIONS)]


@dataclass
class Exemplar:
    """One reference program as the Generator sees it (``code`` None = abstract only)."""

    status: str
    score: float
    abstract: str
    code: str | None = None
    reason: str = ""


def _scores(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())


def parent_section(code: str, abstract: str, score: float, metrics: dict[str, float], diagnostics: str) -> str:
    """The current program: scores, abstract, code and the evaluator's notes."""
    notes = f"\nEvaluator notes: {diagnostics.strip()}" if diagnostics.strip() else ""
    return (f"## Current program (score {score:.4g}; {_scores(metrics)})\nAbstract: {abstract}\n"
            f"```python\n{code}```{notes}\n")


def exemplar_section(n: int, ex: Exemplar) -> str:
    """One reference program: outcome, abstract and, if budgeted, its code."""
    if ex.status == "ok":
        head = f"### Reference {n} (score {ex.score:.4g})"
    else:
        head = (f"### Reference {n} (FAILED, {ex.status}: {ex.reason[:160]}). Its idea may be worth keeping; "
                "do not repeat its error.")
    code = f"```python\n{ex.code}```\n" if ex.code else ""
    return f"{head}\nAbstract: {ex.abstract}\n{code}"


def messages(task_description: str, parent: str, guidance: str, exemplars: list[str], mode: str,
             higher_is_better: bool = True) -> list:
    """Assemble the Generator messages from pre-rendered sections (see :mod:`contextevolve.nodes.compose`).

    ``higher_is_better`` is the task's score orientation; the request names it.
    """
    goal = "raises the score (higher is better)" if higher_is_better else "lowers the score (lower is better)"
    parts = [f"## Task\n{task_description}", parent]
    if guidance:
        parts.append(f"## Direction\n{guidance}")
    if exemplars:
        parts.append("## Reference programs\n" + "\n".join(exemplars))
    if mode == "diff":
        ask = (f"Edit the current program so that it {goal}, following the direction. Edit only inside the "
               "EVOLVE-BLOCK. Each SEARCH part must match the current program exactly.")
    else:
        ask = (f"Write an improved version of the current program that follows the direction and {goal}. "
               "Change the algorithm inside the EVOLVE-BLOCK (a copy of the current program is worth "
               "nothing). Keep the same function name and signature, keep it correct and fast, and return the "
               "whole program.")
    parts.append(f"## Your job\n{ask}")
    return [SystemMessage(SYSTEM_DIFF if mode == "diff" else SYSTEM_FULL), HumanMessage("\n\n".join(parts))]

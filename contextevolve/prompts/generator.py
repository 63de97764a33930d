"""Generator prompt: parent code + guidance g + exemplars → child (paper Eq. 2 with Φ = (z_p, g, E))."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from langchain_core.messages import HumanMessage, SystemMessage

from contextevolve.editing import evolve_region
from contextevolve.splicing import source_lines

SYSTEM = "You are an expert systems programmer improving a program in an evolutionary search."
"""The one system message of every Generator-model request (first asks, second asks, repairs, restarts):
with the task description first in the user message, every such request starts with the same tokens,
which a server reuses from the request just before instead of reading them again (a repair or second
ask right after its Generator request)."""
FORMAT_FULL = "Reply with the complete improved program in a single ```python code block, then nothing else."
FORMAT_FUNCTIONS = ("Reply with only the top-level functions (or classes) you change or add, each written out "
                    "complete from its def line to its last line, plus any new imports, in a single ```python "
                    "code block, then nothing else. Do not repeat functions you leave unchanged: they are kept "
                    "as they are.")
"""The functions edit form (:mod:`contextevolve.splicing`): only what changes is written."""
CODE_END = "\n```\n"
"""Where a reply's code block closes: in ``full`` and ``functions`` mode the Generator's request stops
there, so no tokens are spent on the prose a small model writes after the code (an opening fence is
followed by its language, ```` ```python ````, and does not match)."""


def stop_after_code(mode: str, ctx=None) -> list[str] | None:
    """Stop sequences of a Generator-model request in ``mode``: the end of the code block, except in
    ``diff`` mode (edits may come in several blocks, fenced or not) or when the run's
    ``search.stop_at_code_end`` (of ``ctx``, a RunContext) is off."""
    if mode == "diff" or (ctx is not None and not ctx.search.stop_at_code_end):
        return None
    return [CODE_END]
EDIT_RULES = ("Write each edit as a SEARCH part holding lines copied character for character from the current "
              "program and a REPLACE part holding the lines that take their place:")
EXAMPLE_LINES = 2
"""Lines of the program itself shown as the SEARCH part of the format example."""


def _statement_lines(program: str) -> set[int] | None:
    """1-based numbers of the lines on which an indented statement other than a docstring starts, or
    None when ``program`` does not parse."""
    try:
        tree = ast.parse(program)
    except SyntaxError:
        return None
    return {node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.stmt) and node.col_offset > 0
            and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))}


def _example_lines(program: str) -> list[str]:
    """``EXAMPLE_LINES`` consecutive indented statement lines of ``program`` (inside its EVOLVE-BLOCK
    when it has one; no docstring or comment) that occur once in it, or ``[]`` when there are none."""
    region = evolve_region(program)
    first = program[:region[0]].count("\n") if region else 0
    body = program[region[0]:region[1]] if region else program
    lines, statements = body.splitlines(), _statement_lines(program)
    for at in range(len(lines) - EXAMPLE_LINES + 1):
        pick = lines[at:at + EXAMPLE_LINES]
        if statements is not None:
            code = all(first + at + n + 1 in statements for n in range(EXAMPLE_LINES))
        else:
            code = all(line.startswith((" ", "\t")) and line.strip() and not line.strip().startswith(("#", '"', "'"))
                       for line in pick)
        if code and program.count("\n".join(pick)) == 1:
            return pick
    return []


def edit_format(program: str) -> str:
    """How to write SEARCH/REPLACE edits against ``program``, with an example made of its own lines.

    Shared by the Generator (diff mode), its second ask after a twin and the repair prompt. The
    example's SEARCH part is real lines of ``program`` and its REPLACE part repeats them: a model
    that copies the example verbatim then makes a twin, which costs no evaluation (a small model
    copied placeholder and made-up examples as SEARCH text: docs/decisions/generation-mode.md).
    """
    pick = _example_lines(program)
    if not pick:
        return (EDIT_RULES + "\n<<<<<<< SEARCH\n(lines of the current program)\n=======\n(their new version)\n"
                ">>>>>>> REPLACE")
    lines = "\n".join(pick)
    return (f"{EDIT_RULES}\n<<<<<<< SEARCH\n{lines}\n=======\n{lines}\n>>>>>>> REPLACE\n"
            "(This example only shows the shape: its REPLACE part repeats the SEARCH lines, so it changes nothing. "
            "Your REPLACE parts must change the code.)")


MUTATIONS: tuple[str, ...] = (
    "change the order in which the items are considered (sort them by another key, or reverse the order)",
    "change the rule that picks among candidates that are equally good (the tie-break)",
    "after the solution is built, add a pass that moves or swaps single items while that improves the score",
    "build several candidate solutions (for example from different orders) and keep the best one",
    "change the quantity the greedy choice minimises or maximises to take one more factor into account",
    "change a numeric constant, limit or threshold the algorithm uses",
)
"""Generic, behaviour-changing edits named in the second ask after a twin: a small model told only
"change the algorithm" mostly rewrites docstrings, while one named mutation gives it a concrete edit to
make (docs/decisions/second-ask.md). Each applies to any of the five tasks."""


def mutation_for(seed: int, iteration: int) -> str:
    """The mutation named in the re-ask of ``iteration`` (deterministic in ``seed`` and ``iteration``)."""
    return MUTATIONS[(seed + iteration) % len(MUTATIONS)]


_DOCUMENTED = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
"""The nodes whose first statement, a string, is a docstring (an ``if`` or ``for`` body's is not)."""


def without_docstrings(program: str) -> str:
    """``program`` without its docstrings (module, functions, classes); comments, the EVOLVE-BLOCK markers
    and every other statement are kept as they are.

    Only the docstring's own characters go, with the ``;`` that joins it to a statement after it on its
    line; a line left blank by that goes too. So ``def f(): "doc"; return 1`` becomes
    ``def f(): return 1``. A docstring that is its definition's whole body stays (without it the
    definition would not parse). A program that does not parse, or that would not parse without its
    docstrings, is returned unchanged.
    """
    try:
        tree = ast.parse(program)
    except SyntaxError:
        return program
    spans = [(node.body[0].lineno, node.body[0].col_offset, node.body[0].end_lineno, node.body[0].end_col_offset)
             for node in ast.walk(tree)
             if isinstance(node, _DOCUMENTED) and len(node.body) > (0 if isinstance(node, ast.Module) else 1)
             and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
             and isinstance(node.body[0].value.value, str)]
    lines = [line.encode() for line in source_lines(program)]  # ast's columns count UTF-8 bytes
    for first, start, last, end in sorted(spans, reverse=True):  # bottom up: earlier spans keep their places
        if last is None or end is None or last > len(lines):
            return program
        head, tail = lines[first - 1][:start], lines[last - 1][end:]
        tail = re.sub(rb"^[ \t]*;[ \t]*", b"", tail, count=1)  # the ";" joining it to the next statement
        joined = head + tail
        lines[first - 1:last] = [] if not joined.strip() else [joined if head.strip() else head + tail.lstrip()]
    result = b"".join(lines).decode()
    try:
        ast.parse(result)
    except SyntaxError:
        return program
    return result


def reask_messages(task_description: str, parent_source: str, mutation: str, higher_is_better: bool = True,
                   mode: str = "full") -> list:
    """The Generator's second ask after a twin: a new conversation, not a follow-up of the first.

    It holds only the task, the current program without its docstrings and one concrete ``mutation``
    to make, and wants the whole program back (or, in ``functions`` mode, the functions it changes).
    A new conversation because, replayed on stored second asks, it beat a follow-up asking for
    SEARCH/REPLACE edits (docs/decisions/second-ask.md).
    """
    goal = "raises the score (higher is better)" if higher_is_better else "lowers the score (lower is better)"
    form = FORMAT_FUNCTIONS if mode == "functions" else "Return the whole program. " + FORMAT_FULL
    return [SystemMessage(SYSTEM), HumanMessage(
        f"## Task\n{task_description}\n\n## Current program\n```python\n{without_docstrings(parent_source)}```\n\n"
        f"## Your job\nMake one concrete change to how this program computes its result: {mutation}. The change "
        f"should be one that {goal}. Keep the function name and signature. {form}")]


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


def exemplars_part(sections: list[str]) -> str:
    """The Generator prompt's part that shows the reference programs (pre-rendered sections, in
    order); empty when there are none. :func:`messages` joins it to the other parts with a blank line."""
    return "## Reference programs\n" + "\n".join(sections) if sections else ""


def messages(task_description: str, parent: str, guidance: str, exemplars: list[str], mode: str,
             higher_is_better: bool = True, parent_source: str = "") -> list:
    """Assemble the Generator messages from pre-rendered sections (see :mod:`contextevolve.nodes.compose`).

    ``higher_is_better`` is the task's score orientation; the request names it. In ``diff`` mode the
    edit format is shown with lines of ``parent_source`` (:func:`edit_format`).
    """
    goal = "raises the score (higher is better)" if higher_is_better else "lowers the score (lower is better)"
    parts = [f"## Task\n{task_description}", parent]
    if guidance:
        parts.append(f"## Direction\n{guidance}")
    if exemplars:
        parts.append(exemplars_part(exemplars))
    if mode == "diff":
        ask = (f"Edit the current program so that it {goal}, following the direction. Edit only inside the "
               "EVOLVE-BLOCK. Reply only with one or more SEARCH/REPLACE edits; each SEARCH part must match the "
               "current program exactly. " + edit_format(parent_source))
    else:
        ask = (f"Write an improved version of the current program that follows the direction and {goal}. "
               "Change the algorithm inside the EVOLVE-BLOCK (a copy of the current program is worth "
               "nothing). Keep the same function name and signature and keep it correct and fast. "
               + (FORMAT_FUNCTIONS if mode == "functions" else "Return the whole program. " + FORMAT_FULL))
    parts.append(f"## Your job\n{ask}")
    return [SystemMessage(SYSTEM), HumanMessage("\n\n".join(parts))]

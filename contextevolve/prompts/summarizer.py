"""Summarizer prompt: abstract z_c from the parent abstract z_p and the child code c_c (paper Eq. 4)."""

from __future__ import annotations

from langchain_core.messages import HumanMessage, SystemMessage

SYSTEM = ("You write compact technical abstracts of programs for an evolutionary code search. "
          "Plain prose, no code, no headings.")

INHERITED = ("Write the abstract of the NEW program in at most 70 words, as two sentences. The first begins "
             "\"Changed:\" and says what is new or changed relative to the parent (\"nothing\" if its logic "
             "is the same). The second begins \"Kept:\" and names the traits it keeps from the parent. Name "
             "the core algorithm, ordering/selection rules and data structures. Do not copy the parent "
             "abstract.")
"""Asks for what changed first, in a set form: asked for "both" what is new and what is kept, the embedded
model began most abstracts by copying the parent's whole (``nodes.summarize.finish_abstract``)."""
FORM_WORDS = ("Changed:", "Kept:")
"""The words :data:`INHERITED` asks the two sentences to begin with."""
NOVEL_ONLY = ("Write the abstract of the NEW program in at most 70 words describing ONLY what is new or "
              "changed relative to the parent. Do not describe anything it inherits.")
INITIAL = ("Write the abstract of this program in at most 70 words: its core algorithm, ordering/selection "
           "rules, data structures and key design choices.")


FEEDBACK_CHARS = 400
"""Characters of the evaluator's feedback shown (when the task asks for it)."""


MEASURED_LINES = 4
"""Lines taken out, and lines put in, that :func:`measured_change` names at most (each side)."""
MEASURED_CHARS = 80
"""Characters of one line :func:`measured_change` names (longer ones are cut, with ``...``)."""


def measured_change(lines: list[str]) -> str:
    """A "Changed:" sentence written from a child's changed lines (``- old`` / ``+ new``), without a model.

    What a child's abstract says when the Summarizer repeated its parent's change: the code the child took
    out and put in, at most :data:`MEASURED_LINES` lines each, each cut at :data:`MEASURED_CHARS`; a line
    on both sides (moved, such as an import) is no change.
    """
    taken, put = ({line[2:] for line in lines if line.startswith(side)} for side in ("- ", "+ "))

    def quoted(side: str) -> str:
        picked = [line[2:] for line in lines if line.startswith(side) and line[2:] not in taken & put]
        shown = [f"`{t if len(t) <= MEASURED_CHARS else t[:MEASURED_CHARS] + '...'}`"
                 for t in picked[:MEASURED_LINES]]
        more = len(picked) - len(shown)
        return "; ".join(shown) + (f" and {more} more" if more > 0 else "")

    out, into = quoted("- "), quoted("+ ")
    if not out and not into:
        return "Changed: its code moves lines of its parent's."
    if out and into:
        return f"Changed: its code puts in {into} where its parent had {out}."
    return f"Changed: its code adds {into}." if into else f"Changed: its code takes out {out}."


def messages(task_title: str, child_code: str, parent_abstract: str | None, variant: str,
             feedback: str = "") -> list:
    """Messages asking for z_c, the abstract of ``child_code``.

    ``parent_abstract=None`` abstracts the initial program; ``feedback`` (the evaluator's diagnostics of
    the program, capped at :data:`FEEDBACK_CHARS`) follows the code when given.
    """
    shown = f"Evaluator's feedback on it:\n{feedback[:FEEDBACK_CHARS]}\n\n" if feedback.strip() else ""
    if parent_abstract is None:
        user = f"Task: {task_title}.\n\nProgram:\n```python\n{child_code}```\n\n{shown}{INITIAL}"
    else:
        instruction = NOVEL_ONLY if variant == "novel_only" else INHERITED
        user = (f"Task: {task_title}.\n\nParent abstract: {parent_abstract}\n\n"
                f"New program:\n```python\n{child_code}```\n\n{shown}{instruction}")
    return [SystemMessage(SYSTEM), HumanMessage(user)]

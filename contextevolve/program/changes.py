"""What a child changed in its parent's code, as the lines it took out and put in.

The Navigator reads a step parent -> child through the programs' abstracts; a small model's abstract
often misnames the change (an LFU child described as "keeps FIFO"), and the guidance written from it
repeats an idea whose step it cannot recognise. The changed lines are the step's own evidence, read from
the two programs. Shown to the Navigator or the Summarizer, replayed, they measured no gain
(docs/decisions/step-changes.md, docs/decisions/summarizer-abstracts.md); a child's abstract whose
"Changed:" sentence the Summarizer copied from its parent's says them instead
(``nodes.summarize.with_measured_change``; docs/decisions/summarizer-abstracts.md).
"""

from __future__ import annotations

import ast
import difflib

from contextevolve.program.twins import strip_docstrings

LINE_CHARS = 120
"""A changed line longer than this is cut, with ``...``: one long expression must not fill the prompt."""


def _printed(source: str) -> str | None:
    """``source`` printed back from its syntax tree without docstrings; None if it does not parse."""
    try:
        return ast.unparse(strip_docstrings(ast.parse(source)))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def code_lines(source: str, *, parsed: bool = True) -> list[str]:
    """``source``'s lines without comments, blank lines or indentation.

    ``parsed``: printed back from its syntax tree (``ast.unparse``, without docstrings), so two programs
    that differ only in layout, comments or docstrings give the same lines; a source that does not parse,
    or ``parsed=False``, gives its own lines.
    """
    return _lines((_printed(source) if parsed else None) or source)


def _lines(text: str) -> list[str]:
    """``text``'s non-blank lines that are not comments, stripped."""
    return [s for s in (line.strip() for line in text.splitlines()) if s and not s.startswith("#")]


def _clip(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + "..."


def changed_lines(parent: str, child: str) -> list[str]:
    """The lines ``child`` took out of ``parent`` (``- line``) and put in (``+ line``), in program order.

    Both are compared as :func:`code_lines`: printed back from their syntax trees when both parse (statements
    without comments, docstrings or layout), else as written; each hunk lists its removed lines, then its
    added ones. Empty when the two run the same statements, or when either source is empty: a child never
    built, or a copy (code twin), is stored without its code, and "it deleted everything" would be false.
    """
    if not parent.strip() or not child.strip():
        return []
    old, new = _printed(parent), _printed(child)  # each source parsed once
    if old is None or new is None:
        old, new = parent, child
    old, new = _lines(old), _lines(new)
    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag != "equal":
            out += [f"- {_clip(line)}" for line in old[i1:i2]] + [f"+ {_clip(line)}" for line in new[j1:j2]]
    return out

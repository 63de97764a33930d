"""What a child changed in its parent's code, as the lines it took out and put in.

The Navigator reads a step parent -> child through the programs' abstracts; a small model's abstract
often misnames the change (an LFU child described as "keeps FIFO"), and the guidance written from it
repeats an idea whose step it cannot recognise. The changed lines are the step's own evidence, read from
the two programs; shown to the Navigator only with ``search.step_changes`` set, since replayed they measured
no gain (docs/decisions/step-changes.md), and to the Summarizer with ``search.summary_changes`` (replayed:
no gain either). A child's abstract whose "Changed:" sentence the Summarizer copied from its parent's says
them instead (``nodes.summarize.with_measured_change``; docs/decisions/summarizer-abstracts.md).
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


def _lines(text: str, indent: bool = False) -> list[str]:
    """``text``'s non-blank lines that are not comments, stripped (``indent``: on the right only)."""
    return [line.rstrip() if indent else line.strip() for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def _clip(line: str, width: int) -> str:
    return line if len(line) <= width else line[:width] + "..."


def changed_lines(parent: str, child: str, *, width: int = LINE_CHARS, indent: bool = False) -> list[str]:
    """The lines ``child`` took out of ``parent`` (``- line``) and put in (``+ line``), in program order.

    Both are compared as :func:`code_lines`: printed back from their syntax trees when both parse (statements
    without comments, docstrings or layout), else as written; each hunk lists its removed lines, then its
    added ones. Empty when the two run the same statements, or when either source is empty: a child never
    built, or a copy (code twin), is stored without its code, and "it deleted everything" would be false.
    A line longer than ``width`` characters is cut there, with ``...``; ``indent`` keeps each line's
    indentation (a block put in reads as code), so a line that only moved in or out counts as changed.
    """
    if not parent.strip() or not child.strip():
        return []
    old, new = _printed(parent), _printed(child)  # each source parsed once
    if old is None or new is None:
        old, new = parent, child
    old, new = _lines(old, indent), _lines(new, indent)
    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag != "equal":
            out += ([f"- {_clip(line, width)}" for line in old[i1:i2]]
                    + [f"+ {_clip(line, width)}" for line in new[j1:j2]])
    return out


def changes_text(lines: list[str], limit: int) -> str:
    """Changed lines as a prompt shows them: at most ``limit``, one indented line each, then how many more.

    The Navigator shows them under a step's line, the Summarizer under the new program.

    ``lines`` are :func:`changed_lines`'s (``- old`` / ``+ new``). Empty when
    there are none or ``limit`` is 0.
    """
    if not lines or limit <= 0:
        return ""
    shown = "".join(f"\n    {line}" for line in lines[:limit])
    more = len(lines) - limit
    return shown + (f"\n    ({more} more changed line{'s' if more > 1 else ''})" if more > 0 else "")

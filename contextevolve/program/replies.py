"""Reading a Generator reply (untrusted text): its code blocks, its program, a program's EVOLVE-BLOCK.

It also defines :class:`EditError`, the reason a reply cannot become a child. Shared by
:mod:`contextevolve.program.edits` (rewrites and SEARCH/REPLACE edits) and
:mod:`contextevolve.program.splicing` (whole functions spliced in by name), so neither imports the
other's internals.
"""

from __future__ import annotations

import re

BLOCK_START = "# EVOLVE-BLOCK-START"
BLOCK_END = "# EVOLVE-BLOCK-END"

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.S)


class EditError(ValueError):
    """The Generator's output cannot be turned into a program; the message is the reason.

    ``source`` holds the child when it was built but does not compile (a repair can start from
    it); ``unchanged`` is True when the reply gave its base program back (the same code apart from
    comments and layout; the novelty check's wider "twin" is
    :func:`contextevolve.program.twins.normalized_code`'s).
    """

    def __init__(self, message: str, *, source: str = "", unchanged: bool = False):
        super().__init__(message)
        self.source = source
        self.unchanged = unchanged


def evolve_region(source: str) -> tuple[int, int] | None:
    """Character span ``(start, end)`` of the text between the EVOLVE-BLOCK markers, or None."""
    start = source.find(BLOCK_START)
    end = source.find(BLOCK_END, start + 1) if start >= 0 else -1
    if start < 0 or end < 0:
        return None
    return source.index("\n", start) + 1, end


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block of ``text`` as ``(language in lower case, body)``, in order.

    An unclosed last block runs to the end of the text.
    """
    return [(lang.lower(), body) for lang, body in _FENCE.findall(text)]


def extract_code(text: str) -> str:
    """The program in ``text``: the largest fenced block (python preferred), else the bare text.

    Raises:
        EditError: no code found.
    """
    blocks = code_blocks(text)
    python = [body for lang, body in blocks if lang in ("python", "py", "python3")]
    candidates = python or [body for _, body in blocks]
    if candidates:
        return max(candidates, key=len).strip("\n") + "\n"
    stripped = text.strip()
    if re.search(r"^\s*(def|class|import|from)\s", stripped, re.M):
        return stripped + "\n"
    raise EditError("the reply contains no code block")

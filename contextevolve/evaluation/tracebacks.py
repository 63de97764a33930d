"""The part of a candidate's traceback worth keeping with its record (and reading for a missing import).

The runner formats tracebacks from inside the sandbox, so they name the harness's and the
runtime's files as well as the candidate's. A reader (a person, the import fix) needs only the frames in the
candidate's own file (``candidate.py``, see :mod:`contextevolve.evaluation.isolation`) with
their line numbers and code, and the exception itself.
"""

from __future__ import annotations

import re

CANDIDATE_FILE = "candidate.py"
"""Name of the candidate's module file inside the sandbox's working directory."""
_FRAME = re.compile(r'^\s*File "([^"]*)", line (\d+)(?:, in (.+))?$')
MAX_CHARS = 1200
"""Longest excerpt returned."""


def candidate_excerpt(traceback_text: str, *, max_chars: int = MAX_CHARS) -> str:
    """Frames of the candidate's own file plus the exception lines, from a formatted traceback.

    Args:
        traceback_text: text as ``traceback.format_exception`` writes it (untrusted: it may
            hold anything the candidate printed into its exception).
        max_chars: cap of the result, characters (the end is kept: the exception matters most).

    Returns:
        Lines like ``line 12, in place_models`` / ``    heap = heapq.heapify(x)`` followed by
        ``NameError: name 'heapq' is not defined``; a SyntaxError keeps its caret lines. Empty
        when ``traceback_text`` is empty.
    """
    lines = traceback_text.rstrip().splitlines()
    out: list[str] = []
    keep_code = False
    tail_from = len(lines)
    for i, line in enumerate(lines):
        match = _FRAME.match(line)
        if match:
            keep_code = match.group(1).endswith("/" + CANDIDATE_FILE) or match.group(1) == CANDIDATE_FILE
            if keep_code:
                where = f", in {match.group(3)}" if match.group(3) else ""
                out.append(f"line {match.group(2)}{where}")
            tail_from = len(lines)
            continue
        if line.startswith(("Traceback (most recent call last)", "  File \"<frozen")):
            continue
        if line.startswith((" ", "\t")) and tail_from == len(lines):
            if keep_code and not set(line.strip()) <= set("^~ "):
                out.append("    " + line.strip())
            elif keep_code and line.strip():  # the caret line of a SyntaxError points at the column
                out.append(line)
            continue
        if tail_from == len(lines):
            tail_from = i
        out.append(line)
    text = "\n".join(out).strip("\n")
    return text if len(text) <= max_chars else "..." + text[-max_chars:]

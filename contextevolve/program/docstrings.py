"""Docstrings of program text: a view of a program without them, and a rewrite given its parent's back.

The Generator may be shown programs without their docstrings (the edit form decides, and an ask after a
twin shows its program without them: :mod:`contextevolve.program.forms`); a rewrite written from that
view gets its parent's docstrings back (:func:`restore_docstrings`, which shares the functions form's
splicing code).
"""

from __future__ import annotations

import ast
import re

from contextevolve.program.splicing import restore_docstrings, source_lines

__all__ = ["restore_docstrings", "without_docstrings"]

_DOCUMENTED = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
"""The nodes whose first statement, a string, is a docstring (an ``if`` or ``for`` body's is not)."""


def without_docstrings(program: str) -> str:
    """``program`` without its docstrings (module, functions, classes).

    Comments, the EVOLVE-BLOCK markers and every other statement are kept as they are.
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
    spans = [(node.body[0].lineno, node.body[0].col_offset, node.body[0].end_lineno,
              node.body[0].end_col_offset)
             for node in ast.walk(tree)
             if isinstance(node, _DOCUMENTED)
             and len(node.body) > (0 if isinstance(node, ast.Module) else 1)
             and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
             and isinstance(node.body[0].value.value, str)]
    lines = [line.encode() for line in source_lines(program)]  # ast's columns count UTF-8 bytes
    for first, start, last, end in sorted(spans, reverse=True):  # bottom up: earlier spans keep their places
        if last is None or end is None or last > len(lines):
            return program
        head, tail = lines[first - 1][:start], lines[last - 1][end:]
        tail = re.sub(rb"^[ \t]*;[ \t]*", b"", tail, count=1)  # the ";" joining it to the next statement
        joined = head + tail
        lines[first - 1:last] = ([] if not joined.strip()
                                 else [joined if head.strip() else head + tail.lstrip()])
    result = b"".join(lines).decode()
    try:
        ast.parse(result)
    except SyntaxError:
        return program
    return result

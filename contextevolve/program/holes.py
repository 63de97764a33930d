"""A program with one block of statements taken out: the hole a second ask after a code twin may show.

A model that wrote its parent out again cannot do so when the part it should change is not shown. A *hole* is
one block of a function inside the EVOLVE-BLOCK (the body of a loop or a branch, or the function's whole body)
replaced by :data:`PLACEHOLDER`; the reply writes that function again, which is spliced into the parent by
name (:func:`~contextevolve.program.splicing.apply_functions`). Why: docs/decisions/hole-ask.md.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from contextevolve.program.replies import EditError, evolve_region
from contextevolve.program.splicing import apply_functions, reply_code

HOLE_MARK = "# HOLE"
"""The comment that marks the hole in the program shown (a reply that keeps it left the hole unfilled)."""
PLACEHOLDER = f"...  {HOLE_MARK}: lines removed here; write new code in their place"
"""The statement that stands where the block was (``...`` keeps the program shown parseable)."""
_TRIVIAL = (ast.Pass, ast.Continue, ast.Break)


@dataclass(frozen=True)
class Hole:
    """One block of ``source`` that can be taken out.

    Attributes:
        function: the top-level function that holds it (the one the reply writes again).
        start, end: its first and last line in ``source``, 1-based and inclusive.
        indent: the block's indentation (the placeholder's).
    """

    function: str
    start: int
    end: int
    indent: str


def _blocks(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[list[ast.stmt]]:
    """The function's body and every body of a statement within it (a branch, a loop, a ``with``, a handler).

    A leading docstring is not part of a body.
    """
    bodies = []
    for node in ast.walk(function):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if not isinstance(body, list) or not body or not isinstance(body[0], ast.stmt):
                continue
            if (isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                body = body[1:]
            if body:
                bodies.append(body)
    return bodies


def holes(source: str) -> list[Hole]:
    """Every block of ``source`` that a hole may take, in the order of their lines.

    A block qualifies when it lies in a top-level function inside the EVOLVE-BLOCK (anywhere when the
    program has none), starts on a line of its own (not ``if x: y``) and holds a statement other than
    ``pass``, ``continue`` or ``break``. ``[]`` when the program does not parse.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    region = evolve_region(source)
    first, last = ((source[:region[0]].count("\n") + 1, source[:region[1]].count("\n") + 1) if region
                   else (1, source.count("\n") + 1))
    lines = source.splitlines()
    found: dict[tuple[int, int], Hole] = {}
    for function in tree.body:
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if not (first <= function.lineno and function.end_lineno <= last):
            continue
        for body in _blocks(function):
            start, end = body[0].lineno, body[-1].end_lineno
            opening = lines[start - 1]
            indent = opening[:len(opening) - len(opening.lstrip())]
            if len(indent) != body[0].col_offset or all(isinstance(s, _TRIVIAL) for s in body):
                continue  # shares its line with the statement that holds it, or does nothing
            found.setdefault((start, end), Hole(function.name, start, end, indent))
    return sorted(found.values(), key=lambda hole: (hole.start, -hole.end))


def punched(source: str, hole: Hole) -> str:
    """``source`` with ``hole``'s lines replaced by the :data:`PLACEHOLDER` line."""
    lines = source.splitlines(keepends=True)
    return "".join([*lines[:hole.start - 1], f"{hole.indent}{PLACEHOLDER}\n", *lines[hole.end:]])


def choose(source: str, index: int) -> Hole | None:
    """The ``index``-th hole of ``source``, counted round (:func:`holes`); None when it has none."""
    found = holes(source)
    return found[index % len(found)] if found else None


def fill(parent: str, reply: str, function: str) -> str:
    """The child the reply makes of ``parent``: the reply's definitions spliced in by name.

    Raises:
        EditError: the reply kept the placeholder, does not define ``function``, or cannot be spliced
            (:func:`~contextevolve.program.splicing.apply_functions`).
    """
    code = reply_code(reply)
    if HOLE_MARK in code:
        raise EditError("the reply kept the hole's placeholder instead of writing the removed lines anew")
    try:
        defined = {node.name for node in ast.parse(code).body
                   if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    except SyntaxError as exc:
        raise EditError(f"the function in the reply does not parse: line {exc.lineno}: {exc.msg}") from None
    if function not in defined:
        raise EditError(f"the reply does not define {function}, the function with the hole")
    return apply_functions(parent, reply)

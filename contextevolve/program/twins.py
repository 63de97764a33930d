"""Behavioural identity of program text: the normalised-code digest behind "twin" (the same program).

A child whose digest equals its parent's or a stored program's is a *twin*: it is not evaluated
(docs/decisions/second-ask.md). The digest ignores what cannot change how a program runs: comments,
docstrings, layout, imports nothing reads, helpers nothing calls, and (for programs that ran) the type
annotations of functions.
"""

from __future__ import annotations

import ast
import functools
import hashlib


def strip_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` with the docstring of its module, functions and classes taken out (in place; returned)."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return tree


def _strip_unused_imports(tree: ast.AST) -> ast.AST:
    """Drop imported names the program never reads (a star import stays)."""
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        kept = []
        for stmt in body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                stmt.names = [a for a in stmt.names
                              if a.name == "*" or (a.asname or a.name.split(".")[0]) in used]
                if not stmt.names:
                    continue
            kept.append(stmt)
        node.body = kept or [ast.Pass()]
    return tree


def _strip_dead_definitions(tree: ast.Module, entry: str) -> ast.Module:
    """Drop undecorated top-level functions and classes, other than ``entry``, that nothing reads.

    Definitions whose name the program never reads are dropped until none is left: code that cannot
    run. (A name read only through a string, ``globals()["f"]``, is not seen; no task's harness reaches
    a program that way.) A program that does not define ``entry`` by a ``def`` keeps everything: what
    its harness reaches is unknown.
    """
    if not any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == entry for s in tree.body):
        return tree
    while True:
        used = {node.id for node in ast.walk(tree)
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
        dead = [stmt for stmt in tree.body
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and not stmt.decorator_list and stmt.name != entry and stmt.name not in used]
        if not dead:
            return tree
        tree.body = [stmt for stmt in tree.body if stmt not in dead] or [ast.Pass()]


class _FunctionAnnotations(ast.NodeTransformer):
    """Drops the type annotations of functions: their parameters', returns' and local variables'.

    ``x: int = 1`` becomes ``x = 1``; a bare ``x: int`` keeps its target, which makes ``x`` local, with
    the annotation ``None``. Annotations at class and module level stay: a dataclass reads them.
    """

    def __init__(self) -> None:
        self.in_function = False

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        node.returns = None
        arguments = node.args
        for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg,
                    arguments.kwarg]:
            if arg is not None:
                arg.annotation = None
        return self._scoped(node, in_function=True)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        return self._scoped(node, in_function=False)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if not self.in_function:
            return node
        if node.value is not None:
            return ast.Assign(targets=[node.target], value=node.value)
        node.annotation = ast.Constant(None)
        return node

    def _scoped(self, node: ast.AST, *, in_function: bool) -> ast.AST:
        outer, self.in_function = self.in_function, in_function
        self.generic_visit(node)
        self.in_function = outer
        return node


def normalized_code(source: str, entry: str | None = None, *, annotations: bool = True) -> str | None:
    """A digest (hex SHA-256) of ``source``'s AST without docstrings and unused imports.

    None if it does not parse; given the task's ``entry`` function, also without top-level functions and
    classes nothing calls (:func:`_strip_dead_definitions`; ``None`` or ``""``: keep them);
    ``annotations=False``: also without the type annotations of functions (:class:`_FunctionAnnotations`),
    an identity only for programs that run. Programs that differ only in comments, docstrings, layout, an
    unused import or an uncalled helper have the same digest. Cached (:func:`_digest`); a MemoryError or
    RecursionError gives None and is not cached. Why: docs/decisions/twin-identity.md.
    """
    try:
        return _digest(source, entry, annotations)
    except (MemoryError, RecursionError):
        return None


@functools.lru_cache(maxsize=32768)
def _digest(source: str, entry: str | None, annotations: bool = True) -> str | None:
    """:func:`normalized_code`'s cached part: None for a source that can never parse.

    A MemoryError or RecursionError propagates, so the cache never keeps it.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    tree = strip_docstrings(tree)
    if not annotations:
        tree = _FunctionAnnotations().visit(tree)
    if entry:
        tree = _strip_dead_definitions(tree, entry)
    dump = ast.dump(_strip_unused_imports(tree), annotate_fields=False, include_attributes=False)
    return hashlib.sha256(dump.encode()).hexdigest()


def twin_reason(twin: str) -> str:
    """Reason of a child not evaluated because it is the same program as ``twin`` (a program id)."""
    return (f"duplicate of {twin} (the same code apart from comments, docstrings, type hints, unused imports "
            f"and uncalled helpers); not evaluated")

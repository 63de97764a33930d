"""Docstrings say what a thing is; measurements live in docs/ (docs/decisions/README.md).

A docstring that carries a run's numbers goes stale when the code or the model changes, and LangGraph
Studio shows settings' docstrings as field descriptions. This test reads every docstring of the package
(modules, classes, functions and the string after an assignment, which pydantic and Sphinx read as the
attribute's) and fails on the shapes a measurement takes: a percentage, "N of M", a rate in tokens per
second, a ratio ("3.5×"), "N against M" and "from N to M".
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "contextevolve"

MEASUREMENT = re.compile(
    r"\d+(?:\.\d+)?\s?%"                       # a percentage
    r"|\b\d+ of (?:the |its |their )?\d+\b"    # "5 of the 16"
    r"|\d\s?tok(?:en)?s?/s\b|tokens (?:per|a) second"  # a decoding rate
    r"|\d(?:\.\d+)?\s?×"                       # a ratio
    r"|\b\d+(?:\.\d+)? against \d+"            # "8 twins against 19"
    r"|\bfrom \d+(?:\.\d+)? to \d+(?:\.\d+)? (?:tokens|s|seconds)\b")
"""The shapes of a measured figure in prose."""


def docstrings(tree: ast.AST):
    """Every docstring of a module's tree, with its line: definitions' and attributes'."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for before, stmt in zip([None, *body], body):
            if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                    and isinstance(stmt.value.value, str)):
                continue
            first = before is None and isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                                          ast.AsyncFunctionDef))
            if first or isinstance(before, (ast.Assign, ast.AnnAssign)):
                yield stmt.lineno, stmt.value.value


def test_no_docstring_carries_a_measurement():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, text in docstrings(ast.parse(path.read_text())):
            for match in MEASUREMENT.finditer(" ".join(text.split())):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {match.group(0)!r}")
    assert not found, "measurements in docstrings (move them to docs/):\n" + "\n".join(found)

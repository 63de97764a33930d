"""Mechanical fixes that need no model: a child that fails on a missing import of a known name.

When a failed child's error is a NameError for a known importable name, the repair node adds the import itself
(:func:`missing_import`, :func:`add_import`) and asks the model only for anything else. "Known" is fixed here,
not guessed: a standard-library module, a public name of ``typing`` or of a few standard modules
(:data:`FROM_MODULES`), or a conventional alias of an installed package (:data:`ALIASES`). Why (asked to add
an import, the embedded model often gave the program back unchanged): docs/search.md.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import re
import sys
import typing

from contextevolve.program.edits import BLOCK_START

_NAME_ERROR = re.compile(r"NameError: name '(\w+)' is not defined")
FROM_MODULES = ("collections", "itertools", "functools", "math", "heapq", "bisect", "random", "statistics")
"""Standard modules whose public names are imported with ``from MODULE import NAME`` (first one wins)."""
ALIASES = {"np": ("numpy", "import numpy as np"), "pd": ("pandas", "import pandas as pd"),
           "torch": ("torch", "import torch"), "F": ("torch", "import torch.nn.functional as F")}
"""Conventional aliases: name -> (package that must be installed, import line)."""


@functools.cache
def _from_names() -> dict[str, str]:
    """Importable public names -> their ``from MODULE import NAME`` line (built on first use)."""
    names: dict[str, str] = {name: f"from typing import {name}" for name in typing.__all__}
    for module in FROM_MODULES:
        for name in dir(importlib.import_module(module)):
            if not name.startswith("_") and len(name) > 2:  # `e`, `pi` are more likely a misspelt local
                names.setdefault(name, f"from {module} import {name}")
    return names



def missing_import(error: str) -> str | None:
    """The import line that defines the name ``error``'s ``NameError`` reports missing, else None.

    Args:
        error: the evaluator's reason and traceback text of a failed child.

    Returns:
        ``"import heapq"``, ``"from typing import List"``, ``"import numpy as np"`` ..., or None when
        there is no NameError or the name is not a known importable name (a misspelt local, say).
    """
    found = _NAME_ERROR.search(error)
    if not found:
        return None
    name = found.group(1)
    if name in ALIASES:
        package, line = ALIASES[name]
        return line if importlib.util.find_spec(package) is not None else None
    if name in sys.stdlib_module_names and not name.startswith("_"):
        return f"import {name}"
    return _from_names().get(name)


def add_import(source: str, line: str) -> str:
    """``source`` with the import ``line`` added.

    It goes right after ``# EVOLVE-BLOCK-START`` when the program has the marker (the part that may
    change), else after the module docstring and ``__future__`` imports.
    """
    lines = source.splitlines(keepends=True)
    for n, text in enumerate(lines):
        if text.strip() == BLOCK_START:
            return "".join(lines[:n + 1]) + line + "\n" + "".join(lines[n + 1:])
    at = 0
    try:
        for node in ast.parse(source).body:
            docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and at == 0
            future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
            if not (docstring or future):
                break
            at = node.end_lineno or at
    except SyntaxError:
        at = 0
    return "".join(lines[:at]) + line + "\n" + "".join(lines[at:])

"""Untrusted side of LLM-SQL: build one table's DataFrame, call ``reorder(df)``, serialise the result.

Runs in the sandbox's runner next to the candidate, which can replace any of it: the grader checks
the output (plain lists of strings) and recomputes the hit rate itself. Imports only pandas, at
import time so that its import is not counted in the first call's seconds. Nothing is timed here
(work deferred into ``to_numpy()`` is counted by the supervisor: docs/sandbox.md, *Trusted
measurement*); the candidate's exceptions propagate.
"""

from __future__ import annotations

from itertools import islice

import pandas as pd


def _rows_of(frame, n_rows: int, n_cols: int) -> list:
    """At most ``n_rows`` rows of at most ``n_cols`` cells of the returned table (read in the timed call)."""
    raw = frame.to_numpy().tolist() if hasattr(frame, "to_numpy") else frame
    rows = []
    for row in islice(iter(raw), n_rows):
        if isinstance(row, (str, bytes)) or not hasattr(row, "__iter__"):
            raise _Bad(f"a row of the returned table is {type(row).__name__}, expected a sequence of cells")
        rows.append(list(islice(iter(row), n_cols)))
    return rows


class _Bad(Exception):
    """The candidate's output breaks the contract (reported to the grader as ``{"bad": why}``)."""


def _serialise(value, n_rows: int, n_cols: int) -> dict:
    """``(df, orderings)`` -> ``{"rows": [[str]], "orderings": [[str]]}`` or ``{"bad": why}``.

    Reads at most one row / field more than the input has, so the grader sees a too-long
    output without this process serialising an unbounded one.
    """
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return {"bad": f"returned {type(value).__name__}, expected (df, orderings)"}
    frame, orderings = value
    try:
        rows = _rows_of(frame, n_rows + 1, n_cols + 1)
        orders = _rows_of(orderings, n_rows + 1, n_cols + 1)
    except _Bad as exc:
        return {"bad": str(exc)}
    for row in rows:
        for cell in row:
            if type(cell) is not str:
                return {"bad": f"cell {str(cell)[:40]!r} is {type(cell).__name__}, expected str"}
    for order in orders:
        for name in order:
            if type(name) is not str:
                return {"bad": f"ordering holds {type(name).__name__}, expected column names"}
    return {"rows": rows, "orderings": orders}


def reorder(candidate, args: dict, blobs: dict) -> tuple[dict, dict]:  # noqa: ARG001 - no binary inputs
    """Call ``candidate.reorder(df)`` on one table.

    Args: ``{"columns": [str], "rows": [[str]]}`` (this table only).
    Returns ``({"rows": [[str]], "orderings": [[str]]} | {"bad": str}, {})``.
    """
    df = pd.DataFrame(args["rows"], columns=args["columns"], dtype=object)
    value = candidate.reorder(df)
    return _serialise(value, len(args["rows"]), len(args["columns"])), {}

"""Runs inside the candidate's child process: call ``reorder(df)`` on each table and serialise the result.

The candidate's output crosses back as plain lists of strings; the grader checks that
every input row's cells are there and recomputes the hit rate itself.
"""

from __future__ import annotations

from time import perf_counter  # bound before the candidate is imported: patching time.perf_counter cannot fake speed

from contextevolve.evaluation.time_limit import CaseTimeout, time_limit


def _serialise(value) -> dict:
    """``(df, orderings)`` -> ``{"rows": [[str]], "orderings": [[str]]}`` or ``{"bad": why}``."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return {"bad": f"returned {type(value).__name__}, expected (df, orderings)"}
    frame, orderings = value
    try:
        rows = frame.to_numpy().tolist() if hasattr(frame, "to_numpy") else [list(r) for r in frame]
        orders = [list(o) for o in orderings]
    except Exception as exc:  # noqa: BLE001 - malformed output is reported, not raised
        return {"bad": f"cannot read the returned table/orderings: {type(exc).__name__}: {exc}"[:200]}
    for row in rows:
        for cell in row:
            if type(cell) is not str:
                return {"bad": f"cell {str(cell)[:40]!r} is {type(cell).__name__}, expected str"}
    for order in orders:
        for name in order:
            if type(name) is not str:
                return {"bad": f"ordering holds {type(name).__name__}, expected column names"}
    return {"rows": rows, "orderings": orders}


def run(candidate, payload: dict) -> dict:
    """Call ``candidate.reorder(df)`` on each table of ``payload``, ``repeats`` times for timing.

    Payload: ``{"case_timeout_s": float, "repeats": int, "tables": [{"columns": [str], "rows": [[str]]}]}``.
    Returns ``{"cases": [{"ok": True, "seconds": [s, ...], "rows": ..., "orderings": ... | "bad": str}
    | {"ok": False, "error": str}]}``; the output of the first call is the one graded.
    """
    import pandas as pd

    fn = getattr(candidate, "reorder", None)
    if not callable(fn):
        raise AttributeError("the program defines no function reorder(df)")
    out = []
    for table in payload["tables"]:
        seconds, first = [], None
        try:
            for _ in range(payload["repeats"]):
                df = pd.DataFrame(table["rows"], columns=table["columns"], dtype=object)
                start = perf_counter()
                try:
                    with time_limit(payload["case_timeout_s"]):
                        value = fn(df)
                finally:
                    seconds.append(perf_counter() - start)
                if first is None:
                    first = _serialise(value)
        except CaseTimeout:
            out.append({"ok": False, "error": f"exceeded {payload['case_timeout_s']:g} s"})
            continue
        except Exception as exc:  # noqa: BLE001 - the candidate's failure, recorded per table
            out.append({"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
            continue
        out.append({"ok": True, "seconds": seconds, **first})
    return {"cases": out}

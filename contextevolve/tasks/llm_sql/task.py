"""LLM-SQL task: description, the trusted grader and its metrics.

One ``reorder`` call per table. ``hit_rate`` is the mean over the five tables of
:func:`prefix_hit_rate`, ``seconds`` the mean supervisor-measured seconds of a call, and
``combined_score`` = 0.95 · hit_rate + 0.05 · (12 − min(12, seconds)) / 12 (higher is better).
A failed table counts hit rate 0 and ``FAILED_TABLE_S``; if every call failed, the program is
``failed`` with the first error. Output that is not exactly the input's cells, each input row once,
makes it ``invalid``. Checks and why: docs/tasks.md, *LLM-SQL prefix reuse*.
"""

from __future__ import annotations

import bisect
import os
from collections import Counter
from statistics import fmean

from contextevolve.tasks.base import Call, CallResult, CandidateRun, EvalJob, Evaluation, MetricSpec, Task
from contextevolve.tasks.llm_sql.tables import tables

HARNESS = "contextevolve.tasks.llm_sql.harness"
ENTRY = "reorder"
CASE_TIMEOUT_S = 30.0
"""Wall-clock limit of the ``reorder`` call on one table, seconds (enforced by the supervisor)."""
SECONDS_CAP = 12.0
"""Seconds at which the speed term of the score reaches 0."""
FAILED_TABLE_S = CASE_TIMEOUT_S
"""Seconds a failed table counts with: the per-call limit (the worst any call can take)."""


def prefix_hit_rate(requests: list[str]) -> float:
    """Fraction of characters served from a prefix cache holding every earlier request.

    For each request, the longest common prefix with any earlier one is found among
    its neighbours in a sorted list of the earlier requests (the longest common
    prefix with a set of strings is attained at a lexicographic neighbour).
    """
    total = sum(len(r) for r in requests)
    if not total:
        return 0.0
    seen: list[str] = []
    hits = 0
    for req in requests:
        i = bisect.bisect_left(seen, req)
        best = 0
        for j in (i - 1, i):
            if 0 <= j < len(seen):
                best = max(best, len(os.path.commonprefix((seen[j], req))))
        hits += best
        seen.insert(i, req)
    return hits / total


def score(hit_rate: float, seconds: float) -> float:
    """ADRS combined score: 0.95 · hit rate + 0.05 · (12 − min(12, seconds)) / 12."""
    return 0.95 * hit_rate + 0.05 * (SECONDS_CAP - min(SECONDS_CAP, seconds)) / SECONDS_CAP


DESCRIPTION = """\
LLM-SQL prefix reuse. Each row of a table is sent to an LLM as one request: its field values
concatenated as strings. A prefix KV cache reuses the longest prefix a request shares with any
earlier request. Implement `reorder(df) -> (out_df, orderings)`: choose the order of the rows and,
per row, the order of its fields. out_df has one row per request with the values in send order;
orderings[r] lists the original column names of out_df row r. Every input row's (column, value)
cells must appear exactly once (no dropped, edited or duplicated cells).
hit rate = sum over requests of the longest common character prefix with any earlier request /
total characters. Score = 0.95 * mean hit rate over 5 tables + 0.05 * (12 - min(12, s)) / 12 where
s = mean over tables of the seconds of the reorder call (until the result is read); higher is better.
A table whose call raises or takes more than 30 s counts with hit rate 0 and 30 s. Tables: 1200-1500
rows, 8-9 columns of repeated categorical values (some determined by others, e.g. a movie's director
by its title) and long free-text columns.
"""


SMOKE_ROWS = 200
"""Rows of the smoke run's table (pre-check)."""


class LlmSql(Task):
    """ADRS LLM-SQL: maximise prefix KV-cache hits by reordering rows and fields."""

    name = "llm_sql"
    title = "LLM-SQL prefix reuse (SQL)"
    description = DESCRIPTION
    metrics = [
        MetricSpec(name="hit_rate", description="mean prefix KV-cache hit rate over the 5 tables"),
        MetricSpec(name="seconds", higher_is_better=False, worst=CASE_TIMEOUT_S,
                   description="mean over tables of the supervisor-measured seconds of reorder()"),
    ]
    higher_is_better = True
    score_tolerance = 0.05 * 0.05 / SECONDS_CAP
    """Score difference a child must exceed to count as better: the speed term's change for 50 ms of mean
    call time, above the timing noise of one program's evaluations (why:
    docs/decisions/score-tolerance.md)."""
    timeout_s = 120.0
    baseline_files = {"heuristic": "heuristic.py", "human_sota": "human_sota.py"}

    def job(self) -> EvalJob:
        """One call per table (inputs: that table's columns and rows), each limited to ``CASE_TIMEOUT_S``."""
        return EvalJob(harness=HARNESS, entry=ENTRY, calls=[
            Call(fn="reorder", args={"columns": t["columns"], "rows": t["rows"]}, timeout_s=CASE_TIMEOUT_S)
            for t in tables()])

    def smoke_job(self) -> EvalJob:
        """The first table cut to ``SMOKE_ROWS`` rows: enough to exercise the program, seconds at most."""
        first = tables()[0]
        return EvalJob(harness=HARNESS, entry=ENTRY, calls=[
            Call(fn="reorder", args={"columns": first["columns"], "rows": first["rows"][:SMOKE_ROWS]},
                 timeout_s=CASE_TIMEOUT_S)])

    def grade_run(self, run: CandidateRun) -> Evaluation:
        """Check each table's cells against our own copy and recompute the hit rates; never raises.

        A failed call counts with hit rate 0 and ``FAILED_TABLE_S``; output that breaks the
        contract makes the program ``invalid``.
        """
        ours = tables()
        if len(run.calls) != len(ours):
            return self.rejected("invalid", f"{len(run.calls)} results for {len(ours)} tables")
        hits, secs, lines, errors = [], [], [], []
        for table, call in zip(ours, run.calls):
            name = table["name"]
            if call.status != "ok":
                errors.append(f"table {name}: {call.status}: {str(call.error)[:200]} "
                              f"(counted as hit rate 0, {FAILED_TABLE_S:g} s)")
                hits.append(0.0)
                secs.append(FAILED_TABLE_S)
                continue
            try:
                rows = _parse_output(table, call)
            except _Invalid as exc:
                return self.rejected("invalid", f"table {name}: {exc}")
            hit = prefix_hit_rate(["".join(row) for row in rows])
            hits.append(hit)
            secs.append(call.seconds)
            lines.append(f"{name}: hit rate {hit:.4f}, {call.seconds:.3f} s")
        if not lines:
            return self.rejected("failed", f"every table failed; first: {errors[0]}",
                                 diagnostics="\n".join(errors[:3]))
        hit_rate, seconds = fmean(hits), fmean(secs)
        return Evaluation(status="ok", metrics={"hit_rate": hit_rate, "seconds": seconds},
                          combined_score=score(hit_rate, seconds), diagnostics="\n".join(lines + errors[:2]))


class _Invalid(Exception):
    """A contract violation found while grading; its message is the reason."""


def _parse_output(table: dict, call: CallResult) -> list[list[str]]:
    """The output rows of one call, checked against the schema and the input's cells.

    Raises :class:`_Invalid` when they break it.

    Schema: ``{"rows": [[str, ...], ...], "orderings": [[str, ...], ...]}`` with exactly as
    many rows as the input, each row and ordering exactly as many fields as the input has
    columns, cells no longer than the input's longest; or the harness's ``{"bad": str}``.
    """
    value = call.value
    if not isinstance(value, dict):
        raise _Invalid(f"malformed output: {type(value).__name__}, expected an object with rows and "
                       "orderings")
    if set(value) == {"bad"} and isinstance(value["bad"], str):
        raise _Invalid(value["bad"][:200])
    if set(value) != {"rows", "orderings"}:
        raise _Invalid(f"malformed output: keys {sorted(str(k)[:20] for k in value)[:5]}, expected rows and "
                       "orderings")
    rows, orderings = value["rows"], value["orderings"]
    for what, x in (("rows", rows), ("orderings", orderings)):
        if not isinstance(x, list):
            raise _Invalid(f"{what} is {type(x).__name__}, expected a list")
    n_rows = len(table["rows"])
    if len(rows) != n_rows or len(orderings) != n_rows:
        raise _Invalid(f"{len(rows)} output rows and {len(orderings)} orderings for {n_rows} input rows")
    problem = (_fields_problem(table, orderings, "ordering") or _fields_problem(table, rows, "row")
               or _cells_problem(table, rows, orderings))
    if problem:
        raise _Invalid(problem)
    return rows


def _fields_problem(table: dict, rows: list, what: str) -> str:
    """Why an entry of ``rows`` is not a list of one str per column, each no longer than the longest cell.

    ``what`` is ``"row"`` or ``"ordering"``; the longest cell is the input's. Empty when no entry is wrong.

    Sizes are checked before items are read, types before anything is hashed or compared.
    """
    n_cols, longest = len(table["columns"]), _longest_cell(table["name"])
    for r, row in enumerate(rows):
        if not isinstance(row, list):
            return f"output row {r}: {what} is {type(row).__name__}, expected a list of str"
        if len(row) != n_cols:
            return (f"output row {r}: ordering is not a permutation of the columns "
                    f"({len(row)} names for {n_cols})"
                    if what == "ordering" else f"output row {r}: {len(row)} values for {n_cols} columns")
        for cell in row:
            if type(cell) is not str:
                return f"output row {r}: {what} holds {type(cell).__name__}, expected str"
            if len(cell) > longest:
                return f"output row {r}: a string of {len(cell)} characters, longer than any input cell"
    return ""


_LONGEST: dict[str, int] = {}


def _longest_cell(name: str) -> int:
    """Length of the longest cell or column name of table ``name`` (cached)."""
    if name not in _LONGEST:
        table = next(t for t in tables() if t["name"] == name)
        _LONGEST[name] = max(len(c) for c in [*table["columns"], *(c for row in table["rows"] for c in row)])
    return _LONGEST[name]


def _cells_problem(table: dict, rows: list[list[str]], orderings: list[list[str]]) -> str:
    """Why the output does not hold exactly the input's cells; empty when it does.

    ``rows`` and ``orderings`` have passed :func:`_fields_problem` (lists of strs of the input's shape).
    """
    columns = table["columns"]
    position = {c: i for i, c in enumerate(columns)}
    produced = Counter()
    for r, (row, order) in enumerate(zip(rows, orderings)):
        if sorted(order, key=lambda c: position.get(c, -1)) != columns:
            return f"output row {r}: ordering {str(order[:8])[:120]} is not a permutation of the columns"
        canonical = [""] * len(columns)
        for name, value in zip(order, row):
            canonical[position[name]] = value
        produced[tuple(canonical)] += 1
    expected = Counter(tuple(r) for r in table["rows"])
    if produced != expected:
        missing = expected - produced
        extra = produced - expected
        example = next(iter(extra), None) or next(iter(missing))
        return (f"cells not preserved: {sum(missing.values())} input rows missing, "
                f"{sum(extra.values())} rows not in the input (e.g. {str(list(example))[:80]})")
    return ""

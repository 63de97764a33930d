"""LLM-SQL task: description, the trusted grader and its metrics.

Metrics (ADRS llm_sql, DESIGN.md §6):

* prefix hit rate of a table = Σ over requests of the longest common prefix (in
  characters of the concatenated cell strings) with any earlier request / total
  characters; ``hit_rate`` is the mean over the five tables (higher is better).
* ``seconds``: mean over tables of the median (over repeats) wall-clock seconds of the
  ``reorder`` call (lower is better).
* ``combined_score`` = 0.95 × hit_rate + 0.05 × (12 − min(12, seconds)) / 12.

Hole closed: the output must hold exactly the input's cells — every output row, read
through its ordering, must be one input row's multiset of (column, value) cells, each
input row used once. Dropping, shortening or duplicating cells is ``invalid`` (score 0).
"""

from __future__ import annotations

import bisect
import os
from collections import Counter
from statistics import fmean, median

from contextevolve.evaluation.isolation import CandidateRun
from contextevolve.tasks.base import EvalJob, Evaluation, MetricSpec, Task
from contextevolve.tasks.llm_sql.tables import SPECS, tables

HARNESS = "contextevolve.tasks.llm_sql.harness:run"
CASE_TIMEOUT_S = 30.0
REPEATS = 3
"""Calls per table; the first call's output is graded, the median time is reported."""


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
    """ADRS combined score: 0.95 × hit rate + 0.05 × (12 − min(12, seconds)) / 12."""
    return 0.95 * hit_rate + 0.05 * (12.0 - min(12.0, seconds)) / 12.0


DESCRIPTION = """\
LLM-SQL prefix reuse. Each row of a table is sent to an LLM as one request: its field values
concatenated as strings. A prefix KV cache reuses the longest prefix a request shares with any
earlier request. Implement `reorder(df) -> (out_df, orderings)`: choose the order of the rows and,
per row, the order of its fields. out_df has one row per request with the values in send order;
orderings[r] lists the original column names of out_df row r. Every input row's (column, value)
cells must appear exactly once (no dropped, edited or duplicated cells).
hit rate = sum over requests of the longest common character prefix with any earlier request /
total characters. Score = 0.95 * mean hit rate over 5 tables + 0.05 * (12 - min(12, s)) / 12 where
s = mean seconds of the reorder call; higher is better. Tables: 1200-1500 rows, 6-8 columns of
repeated categorical values (some determined by others, e.g. a movie's director by its title)
and long free-text columns.
"""


class LlmSql(Task):
    """ADRS LLM-SQL: maximise prefix KV-cache hits by reordering rows and fields."""

    name = "llm_sql"
    title = "LLM-SQL prefix reuse (SQL)"
    description = DESCRIPTION
    metrics = [
        MetricSpec(name="hit_rate", description="mean prefix KV-cache hit rate over the 5 tables"),
        MetricSpec(name="seconds", higher_is_better=False, worst=CASE_TIMEOUT_S,
                   description="mean over tables of the median seconds of reorder()"),
    ]
    higher_is_better = True
    timeout_s = 120.0
    baseline_files = {"heuristic": "heuristic.py", "human_sota": "human_sota.py"}

    def job(self) -> EvalJob:
        """Inputs for the child: the five tables (JSON)."""
        return EvalJob(harness=HARNESS, payload={
            "case_timeout_s": CASE_TIMEOUT_S, "repeats": REPEATS,
            "tables": [{"columns": t["columns"], "rows": t["rows"]} for t in tables()]})

    def grade_run(self, run: CandidateRun) -> Evaluation:
        """Check the cells and recompute hit rates (see :meth:`grade`)."""
        return self.grade(run.result, wall_s=run.seconds)

    def grade(self, result: object, wall_s: float | None = None) -> Evaluation:
        """Score harness output ``result`` against our own tables; never raises.

        ``wall_s`` is the child process's wall clock seen by the host: call times summing to
        more than it were not measured honestly.
        """
        cases = result.get("cases") if isinstance(result, dict) else None
        if not isinstance(cases, list) or len(cases) != len(SPECS):
            return self.rejected("invalid", "malformed harness output")
        hits, secs, lines = [], [], []
        for table, case in zip(tables(), cases):
            name = table["name"]
            if not isinstance(case, dict):
                return self.rejected("invalid", "malformed harness output")
            if not case.get("ok"):
                return self.rejected("failed", f"table {name}: {case.get('error', 'failed')}")
            if "bad" in case:
                return self.rejected("invalid", f"table {name}: {case['bad']}")
            problem = _cells_problem(table, case.get("rows"), case.get("orderings"))
            if problem:
                return self.rejected("invalid", f"table {name}: {problem}")
            times = case.get("seconds")
            if not (isinstance(times, list) and times and all(isinstance(t, (int, float)) and t >= 0 for t in times)):
                return self.rejected("invalid", "malformed harness output")
            hit = prefix_hit_rate(["".join(row) for row in case["rows"]])
            hits.append(hit)
            secs.append(float(median(times)))
            lines.append(f"{name}: hit rate {hit:.4f}, {secs[-1]:.3f} s")
        reported = sum(sum(c["seconds"]) for c in cases)
        if wall_s is not None and reported > wall_s:
            return self.rejected("invalid", f"reported call times ({reported:.2f} s) exceed the process's "
                                 f"wall clock ({wall_s:.2f} s)")
        hit_rate, seconds = fmean(hits), fmean(secs)
        return Evaluation(status="ok", metrics={"hit_rate": hit_rate, "seconds": seconds},
                          combined_score=score(hit_rate, seconds), diagnostics="\n".join(lines))


def _cells_problem(table: dict, rows: object, orderings: object) -> str:
    """Why the output does not hold exactly the input's cells; empty when it does."""
    columns = table["columns"]
    if not isinstance(rows, list) or not isinstance(orderings, list):
        return "missing rows or orderings"
    if len(rows) != len(table["rows"]) or len(orderings) != len(rows):
        return f"{len(rows)} output rows and {len(orderings)} orderings for {len(table['rows'])} input rows"
    position = {c: i for i, c in enumerate(columns)}
    produced = Counter()
    for r, (row, order) in enumerate(zip(rows, orderings)):
        if not isinstance(row, list) or not isinstance(order, list) or len(order) != len(row):
            return f"output row {r}: values and ordering differ in length"
        if len(order) != len(columns) or sorted(order, key=lambda c: position.get(c, -1)) != columns:
            return f"output row {r}: ordering {order[:8]} is not a permutation of the columns"
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

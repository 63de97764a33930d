"""Hostile candidates for Transaction Scheduling and LLM-SQL: none of them may pay.

Each program below tries one way of gaming the trusted measurement or the grader — giving
up on the hardest input, forging the sandbox's messages, rebinding clocks, deferring work
past the timed call, returning malformed or oversized output — and must end with the
task's worst score, ``invalid``/``failed``, or (for giving up) a score below the honest
initial program's. The graders are also fed arbitrary JSON directly: nothing may raise.
"""

from __future__ import annotations

import pytest

from contextevolve.evaluation.results import CallResult, CandidateRun
from contextevolve.tasks.llm_sql import task as sql_task
from contextevolve.tasks.llm_sql.tables import tables
from contextevolve.tasks.registry import get_task
from contextevolve.tasks.txn_scheduling import task as ts_task
from contextevolve.tasks.txn_scheduling.workloads import workloads

TS, SQL = get_task("txn_scheduling"), get_task("llm_sql")
FIFO_TS = TS.baselines()["heuristic"]
IDENTITY_SQL = "def reorder(df):\n    return df, [list(df.columns)] * len(df)\n"

_OPS = [sum(len(t) for t in w) for w in workloads()]
BIG_TS_OPS = max(_OPS)  # the largest workload, by operations
_CHARS = [sum(len(c) for r in t["rows"] for c in r) for t in tables()]
BIG_SQL_COLUMNS = tables()[_CHARS.index(max(_CHARS))]["columns"]  # the largest table, by characters


@pytest.fixture(scope="module")
def ts_initial():
    result = TS.evaluate(TS.initial_program)
    assert result.status == "ok"
    return result


@pytest.fixture(scope="module")
def sql_initial():
    result = SQL.evaluate(SQL.initial_program)
    assert result.status == "ok"
    return result


def _honest(source: str, entry: str) -> str:
    """``source`` with its entry function renamed ``_honest`` (a hostile wrapper calls it)."""
    return source.replace(f"def {entry}(", "def _honest(")


def _worst(task, result) -> None:
    assert result.status in ("invalid", "failed"), (result.status, result.reason, result.metrics)
    assert result.combined_score == task.worst_score
    assert result.metrics == {m.name: m.worst for m in task.metrics}


def _forging(entry: str, value: str) -> str:
    """A program whose every call writes a forged ``result`` frame carrying ``value``, then exits.

    ``value`` is a Python expression that may use the call's argument ``x``; the frame goes straight onto
    the runner's response descriptor.
    """
    return (
        "import json, os, struct, sys\n"
        f"def {entry}(x, *rest):\n"
        f"    body = json.dumps({{'type': 'result', 'value': {value}}}).encode()\n"
        "    os.write(int(sys.argv[-1]), struct.pack('>Q', len(body)) + body)\n"
        "    os._exit(0)\n")


# ----------------------------------------------------------------------------- the job itself

def test_each_call_holds_only_its_own_input_and_nothing_scored_against():
    ts_job, sql_job = TS.job(), SQL.job()
    assert (ts_job.entry, ts_job.modules) == ("get_best_schedule",
                                              ["contextevolve.tasks.txn_scheduling.simulator"])
    assert (sql_job.entry, sql_job.modules) == ("reorder", [])
    assert len(ts_job.calls) == 3 and len(sql_job.calls) == 5
    for call, txns in zip(ts_job.calls, workloads()):
        assert set(call.args) == {"num_seqs", "txns"} and not call.blobs
        assert [[tuple(op) for op in t] for t in call.args["txns"]] == [list(t) for t in txns]
        assert call.timeout_s == ts_task.CASE_TIMEOUT_S
    for call, table in zip(sql_job.calls, tables()):
        assert call.args == {"columns": table["columns"], "rows": table["rows"]} and not call.blobs
        assert call.timeout_s == sql_task.CASE_TIMEOUT_S


@pytest.mark.parametrize("task, module", [(TS, "contextevolve.tasks.txn_scheduling.workloads"),
                                          (SQL, "contextevolve.tasks.llm_sql.tables"),
                                          (SQL, "contextevolve.tasks.llm_sql.task")],
                         ids=["ts", "sql", "grader"])
def test_data_generators_and_graders_are_not_importable_in_the_sandbox(task, module):
    result = task.evaluate(f"import {module}\n", timeout_s=20)
    assert result.status == "failed" and "No module named" in result.reason


# ----------------------------------------------------------------------------- giving up on hard inputs

def test_ts_raising_on_the_largest_workload_scores_below_the_initial_program(ts_initial):
    source = _honest(TS.initial_program, "get_best_schedule") + (
        "\ndef get_best_schedule(workload, num_seqs):\n"
        f"    if sum(len(t) for t in workload.txns) == {BIG_TS_OPS}:\n"
        "        raise RuntimeError('too hard')\n"
        "    return _honest(workload, num_seqs)\n")
    result = TS.evaluate(source)
    assert result.status == "ok" and result.metrics["validity"] == pytest.approx(2 / 3)
    assert result.metrics["makespan"] > ts_initial.metrics["makespan"]
    assert result.combined_score < ts_initial.combined_score
    assert "counted at its serial makespan" in result.diagnostics


def test_ts_hanging_on_the_largest_workload_counts_as_failed(monkeypatch, ts_initial):
    monkeypatch.setattr(ts_task, "CASE_TIMEOUT_S", 1.0)
    source = FIFO_TS.replace("    order = list(",
                             f"    if sum(len(t) for t in workload.txns) == {BIG_TS_OPS}:\n"
                             "        while True: pass\n    order = list(")
    result = TS.evaluate(source, timeout_s=30)
    assert result.status == "ok" and result.metrics["validity"] == pytest.approx(2 / 3)
    assert "timeout" in result.diagnostics
    assert result.combined_score < TS.evaluate(FIFO_TS).combined_score < ts_initial.combined_score


def test_sql_raising_on_the_largest_table_scores_below_the_initial_program(sql_initial):
    source = _honest(SQL.initial_program, "reorder") + (
        "\ndef reorder(df):\n"
        f"    if list(df.columns) == {BIG_SQL_COLUMNS!r}:\n"
        "        raise RuntimeError('too hard')\n"
        "    return _honest(df)\n")
    result = SQL.evaluate(source)
    assert result.status == "ok"
    assert result.metrics["hit_rate"] < sql_initial.metrics["hit_rate"]
    # the failed table counts with the per-call limit: more than any successful call could add
    assert result.metrics["seconds"] >= sql_task.FAILED_TABLE_S / 5
    assert result.combined_score < sql_initial.combined_score


def test_sql_every_table_failing_is_failed_with_the_first_error():
    result = SQL.evaluate("def reorder(df):\n    raise ValueError('nope ' + str(len(df)))\n")
    _worst(SQL, result)
    assert result.status == "failed" and "ValueError: nope 1200" in result.reason


# ----------------------------------------------------------------------------- forged results

FORGED_FRAMES = (  # forges report and response frames on every descriptor, then dies mid-call
    "import json, os, struct\n"
    "def _forge():\n"
    "    for h in ({{'type': 'call', 'index': 0, 'status': 'ok', 'seconds': 0.0, 'value': {{}}}},\n"
    "              {{'type': 'result', 'value': {{}}, 'seconds': 0.0}}, {{'type': 'end', 'runner': {{}}}}):\n"
    "        b = json.dumps(h).encode()\n"
    "        for fd in (1, 3, 4, 5, 6):\n"
    "            try:\n                os.write(fd, struct.pack('>Q', len(b)) + b)\n"
    "            except OSError:\n                pass\n"
    "def {entry}(*args):\n"
    "    _forge()\n"
    "    os._exit(0)\n")


@pytest.mark.parametrize("task, entry", [(TS, "get_best_schedule"), (SQL, "reorder")], ids=["ts", "sql"])
def test_forged_frames_and_exiting_mid_call_score_worst(task, entry):
    result = task.evaluate(FORGED_FRAMES.format(entry=entry), timeout_s=30)
    _worst(task, result)


@pytest.mark.parametrize("value, fragment", [
    ("{'order': list(range(100)), 'makespan': 0, 'validity': 1.0}", "malformed output: keys"),
    ("{'order': list(range(10**6))}", "more than 100 entries"),
    ("{'order': [[[[[[]]]]]] * 100}", "expected ints"),
    ("{'order': [1.5] * 100}", "expected ints"),
    ("{'order': [10**30] * 100}", "not a transaction index"),
    ("{'order': None}", "not a list"),
    ("[list(range(100))]", "malformed output"),
    ("'order'", "malformed output"),
    ("None", "malformed output"),
    ("{'bad': {'nested': [1]}}", "malformed output: keys"),
    ("{}", "malformed output: keys"),
], ids=lambda v: v[:30])
def test_ts_forged_results_are_parsed_strictly(value, fragment):
    result = TS.evaluate(_forging("get_best_schedule", value), timeout_s=30)
    _worst(TS, result)
    assert result.status == "invalid" and fragment in result.reason


@pytest.mark.parametrize("value, fragment", [
    # an unhashable cell (the grader builds a multiset of rows)
    ("{'rows': [[['x']] * len(x['columns'])] * len(x['rows']), 'orderings': [x['columns']] * len(x['rows'])}",
     "holds list, expected str"),
    ("{'rows': x['rows'], 'orderings': [x['columns']] * len(x['rows']), 'seconds': [0.0]}",
     "malformed output: keys"),
    ("{'rows': [['y'] * 9] * 10**5, 'orderings': [x['columns']] * 10**5}", "100000 output rows and"),
    ("{'rows': [[1] * len(x['columns'])] * len(x['rows']), 'orderings': [x['columns']] * len(x['rows'])}",
     "holds int, expected str"),
    ("{'rows': [['z' * 10**6] + r[1:] for r in x['rows'][:1]] + x['rows'][1:], "
     "'orderings': [x['columns']] * len(x['rows'])}", "longer than any input cell"),
    ("{'rows': x['rows'], 'orderings': [[{'c': 1}] * len(x['columns'])] * len(x['rows'])}",
     "holds dict, expected str"),
    ("{'rows': 'abc', 'orderings': []}", "rows is str, expected a list"),
    ("[[[[[]]]]]", "malformed output"),
    ("12", "malformed output"),
], ids=lambda v: v[:30])
def test_sql_forged_results_are_parsed_strictly(value, fragment):
    # the forging program receives the DataFrame: turn it back into the call's plain inputs first
    source = _forging("reorder", value).replace(
        "    body =",
        "    x = {'columns': list(x.columns), 'rows': x.astype(str).values.tolist()}\n    body =")
    result = SQL.evaluate(source, timeout_s=30)
    _worst(SQL, result)
    assert result.status == "invalid" and fragment in result.reason


# ----------------------------------------------------------------------------- clocks and lazy work

CLOCKS = ("import time\n_sleep = time.sleep\n"
          "time.perf_counter = time.monotonic = time.time = time.process_time = lambda: 0.0\n"
          "time.perf_counter_ns = time.monotonic_ns = time.time_ns = lambda: 0\n")


def test_ts_rebound_clocks_change_nothing():
    result, fifo = TS.evaluate(CLOCKS + FIFO_TS), TS.evaluate(FIFO_TS)
    assert result.status == "ok" and result.metrics == fifo.metrics


def test_sql_rebound_clocks_do_not_hide_the_time_taken():
    source = CLOCKS + "def reorder(df):\n    _sleep(0.5)\n    return df, [list(df.columns)] * len(df)\n"
    result = SQL.evaluate(source)
    assert result.status == "ok"
    assert result.metrics["seconds"] >= 0.5
    assert result.combined_score < SQL.evaluate(IDENTITY_SQL).combined_score


def test_sql_lazy_result_is_timed_until_it_is_read():
    source = ("import time\n"
              "class Lazy:\n"
              "    def __init__(self, df):\n        self.df = df\n"
              "    def to_numpy(self):\n        time.sleep(0.5)\n        return self.df.to_numpy()\n"
              "def reorder(df):\n    return Lazy(df), [list(df.columns)] * len(df)\n")
    result = SQL.evaluate(source)
    assert result.status == "ok"
    assert result.metrics["seconds"] >= 0.5


# ------------------------------------------------------------------ malformed output through the harness

@pytest.mark.parametrize("body, fragment", [
    ("return 0, range(10**9)", "more than 100 entries"),
    ("import itertools\n    return 0, itertools.count()", "more than 100 entries"),
    ("return 0, [[i] for i in range(100)]", "expected ints"),
    ("return 0, {i: i for i in range(100)}.values().__iter__", "expected a list of ints"),
    ("return 0, None", "expected a list of ints"),
    ("return {'order': list(range(100))}", "expected (cost, order)"),
])
def test_ts_malformed_returns_are_invalid(body, fragment):
    result = TS.evaluate(f"def get_best_schedule(workload, num_seqs):\n    {body}\n", timeout_s=30)
    _worst(TS, result)
    assert result.status == "invalid" and fragment in result.reason


def test_ts_absurd_claimed_cost_is_ignored():
    result = TS.evaluate("def get_best_schedule(workload, num_seqs):\n"
                         "    return float('nan'), list(range(workload.num_txns))\n")
    assert result.status == "ok" and result.metrics == TS.evaluate(FIFO_TS).metrics
    assert "claimed nothing usable" in result.diagnostics


@pytest.mark.parametrize("body, fragment", [
    ("return pd.concat([df] * 50), [list(df.columns)] * (50 * len(df))",
     "1201 output rows and 1201 orderings"),
    ("return [[[c] for c in r] for r in df.values.tolist()], [list(df.columns)] * len(df)", "expected str"),
    ("return df.map(lambda v: {v}), [list(df.columns)] * len(df)", "expected str"),
    ("return df, [[list(df.columns)]] * len(df)", "expected column names"),
    ("return df.iloc[:, 0].to_numpy(), [list(df.columns)] * len(df)", "expected a sequence of cells"),
    ("return df", "expected (df, orderings)"),
    ("return df, [list(df.columns) * 1000] * len(df)", "not a permutation of the columns"),
])
def test_sql_malformed_returns_are_invalid(body, fragment):
    result = SQL.evaluate(f"import pandas as pd\ndef reorder(df):\n    {body}\n", timeout_s=30)
    _worst(SQL, result)
    assert result.status == "invalid" and fragment in result.reason


# ----------------------------------------------------------------------------- the graders are total

JUNK = [None, True, 0, -1, 1.5, "x", "", [], [[]], [None], {}, {"bad": None}, {"bad": ["x"]}, {"bad": "why"},
        {"order": "0123"}, {"order": {"0": 1}}, {"order": [None] * 100}, {"order": [True] * 100},
        {"order": [10**5000] * 100}, {"order": list(range(99)) + [10**5000]},
        {"order": list(range(10**5))}, {"rows": [], "orderings": []},
        {"rows": [[["x"]]], "orderings": [[{}]]},
        {"rows": [{"a": 1}] * 1500, "orderings": [[]] * 1500},
        {"rows": [["a"] * 9] * 1200, "orderings": [None] * 1200},
        {"rows": [[[]] * 9] * 1200, "orderings": [["movie_title"] * 9] * 1200}, {"order": [], "rows": []}]


def _run(values: list, statuses: list[str] | None = None) -> CandidateRun:
    statuses = statuses or ["ok"] * len(values)
    return CandidateRun("ok", "", 1.0, "", "", calls=[
        CallResult(status=s, seconds=0.25, value=v, error="" if s == "ok" else f"boom {i}")
        for i, (s, v) in enumerate(zip(statuses, values))])


@pytest.mark.parametrize("task", [TS, SQL], ids=["ts", "sql"])
@pytest.mark.parametrize("junk", JUNK, ids=[f"junk{i}" for i in range(len(JUNK))])  # repr(10**5000) raises
def test_graders_reject_any_json_value_without_raising(task, junk):
    n = len(task.job().calls)
    for position in (0, n - 1):
        values = [None] * n
        values[position] = junk
        statuses = ["error"] * n
        statuses[position] = "ok"
        result = task.grade_run(_run(values, statuses))  # not grade_safely: the grader itself must be total
        assert result.status == "invalid", (result.status, result.reason)
        assert result.combined_score == task.worst_score
    assert task.grade_run(_run([junk] * (n + 1))).status == "invalid"  # one result too many


@pytest.mark.parametrize("task", [TS, SQL], ids=["ts", "sql"])
def test_all_calls_failed_is_failed_with_the_first_error(task):
    n = len(task.job().calls)
    result = task.grade_run(_run([None] * n, ["timeout", "crashed"] + ["skipped"] * (n - 2)))
    assert result.status == "failed" and "boom 0" in result.reason
    assert result.combined_score == task.worst_score


@pytest.mark.parametrize("claimed", ["1e309", [1], 10**400, -(10**16), 1e300, None, True, {"x": 1}])
def test_ts_grader_ignores_odd_claimed_costs(claimed):
    n = len(TS.job().calls)
    result = TS.grade_run(_run([{"order": list(range(100)), "claimed_cost": claimed}] * n))
    assert result.status == "ok" and "claimed nothing usable" in result.diagnostics

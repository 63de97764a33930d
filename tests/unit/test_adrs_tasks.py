"""The four ADRS tasks beyond MP: baselines ranked as expected, cheaters rejected, metrics recomputed.

Every cheating candidate below is our own attempt to game a grader; each must come back
``invalid`` with a reason and the task's worst score (0 for higher-is-better tasks, 1.0
for sparse attention, whose score is lower-is-better).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from contextevolve.llm import embedded
from contextevolve.tasks.registry import get_task

TS, SQL, LB, SAK = (get_task(n) for n in ("txn_scheduling", "llm_sql", "eplb", "sparse_attention"))

needs_capture = pytest.mark.skipif(not embedded.installed(),
                                   reason="SAK data is captured from the embedded LLM")


def assert_rejected(task, source: str, fragment: str) -> None:
    result = task.evaluate(source)
    assert result.status == "invalid", (result.status, result.reason, result.metrics)
    assert fragment in result.reason
    assert result.combined_score == task.worst_score
    assert result.metrics == {m.name: m.worst for m in task.metrics}


# --------------------------------------------------------------------------- TS

FIFO_TS = TS.baselines()["heuristic"]


def test_ts_initial_beats_fifo_and_sota_beats_initial():
    initial, fifo, sota = (TS.evaluate(s)
                           for s in (TS.initial_program, FIFO_TS, TS.baselines()["human_sota"]))
    assert {initial.status, fifo.status, sota.status} == {"ok"}
    assert fifo.combined_score < initial.combined_score < sota.combined_score
    # The score is recomputed from the makespan: 1e6 / (1 + total) at validity 1.
    assert initial.combined_score == pytest.approx(1e6 / (1 + initial.metrics["makespan"]))


def test_ts_evaluation_is_deterministic():
    a, b = TS.evaluate(TS.initial_program), TS.evaluate(TS.initial_program)
    assert a.metrics == b.metrics  # the randomised greedy is seeded by the harness
    # the notes the Generator reads name no wall time, which differs between evaluations of one program
    assert a.diagnostics == b.diagnostics and "makespan" in a.diagnostics
    assert not re.search(r"\d s\b", a.diagnostics)


def test_ts_claimed_cost_and_tampered_simulator_are_ignored():
    liar = '''
import contextevolve.tasks.txn_scheduling.simulator as sim
sim.makespan = lambda txns, order: 0          # tamper with the child's copy of the simulator
def get_best_schedule(workload, num_seqs):
    workload.txns = ()                        # and with the workload object
    return 0, list(range(100))
'''
    lied, fifo = TS.evaluate(liar), TS.evaluate(FIFO_TS)
    assert lied.status == "ok"
    assert lied.metrics == fifo.metrics  # recomputed from the order with the grader's own workloads
    assert "program claimed 0" in lied.diagnostics


@pytest.mark.parametrize("body, fragment", [
    ("return 0, [0] * 100", "scheduled twice"),
    ("return 0, list(range(50))", "50 entries for 100"),
    ("return 0, list(range(1, 101))", "not a transaction index"),
    ("return 0, [float(i) for i in range(100)]", "expected ints"),
    ("return 0, [True] * 100", "expected ints"),
    ("return list(range(100))", "expected (cost, order)"),
])
def test_ts_cheats_are_rejected(body, fragment):
    assert_rejected(TS, f"def get_best_schedule(workload, num_seqs):\n    {body}\n", fragment)


def test_ts_workload_failures_lower_validity():
    flaky = FIFO_TS.replace("    order = list(range(workload.num_txns))",
                            "    if workload.num_txns and len(workload.txns[0]) > 8:\n"
                            "        raise RuntimeError('x')\n"
                            "    order = list(range(workload.num_txns))")
    result = TS.evaluate(flaky)
    assert result.status == "ok" and result.metrics["validity"] == pytest.approx(2 / 3)
    assert result.combined_score < TS.evaluate(FIFO_TS).combined_score


# --------------------------------------------------------------------------- SQL

IDENTITY_SQL = '''
def reorder(df):
    return df, [list(df.columns)] * len(df)
'''


def test_sql_ggr_beats_unordered_table():
    initial, identity = SQL.evaluate(SQL.initial_program), SQL.evaluate(IDENTITY_SQL)
    assert initial.status == identity.status == "ok"
    assert identity.metrics["hit_rate"] < initial.metrics["hit_rate"]
    assert identity.combined_score < initial.combined_score
    hit, secs = initial.metrics["hit_rate"], initial.metrics["seconds"]
    assert initial.combined_score == pytest.approx(0.95 * hit + 0.05 * (12 - min(12, secs)) / 12)


def test_sql_hit_rate_counts_longest_prefix_with_any_earlier_request():
    from contextevolve.tasks.llm_sql.task import prefix_hit_rate

    assert prefix_hit_rate(["abcd", "abxy", "abcz", "q"]) == pytest.approx((0 + 2 + 3 + 0) / 13)
    assert prefix_hit_rate(["aaaa", "aaaa"]) == pytest.approx(0.5)


@pytest.mark.parametrize("body, fragment", [
    # drop the long free-text cells (they cost prefix hits)
    ("out = df.astype(str).copy()\n    for c in out.columns:\n        out[c] = out[c].str[:3]\n"
     "    return out, [list(df.columns)] * len(df)", "cells not preserved"),
    # make every request identical to the first one
    ("out = df.iloc[[0] * len(df)].reset_index(drop=True)\n    return out, [list(df.columns)] * len(df)",
     "cells not preserved"),
    # drop a column
    ("return df.iloc[:, 1:], [list(df.columns[1:])] * len(df)", "not a permutation of the columns"),
    # fewer rows
    ("return df.iloc[:10], [list(df.columns)] * 10", "output rows"),
    # non-string cells
    ("return df.map(len), [list(df.columns)] * len(df)", "expected str"),
])
def test_sql_cheats_are_rejected(body, fragment):
    assert_rejected(SQL, f"def reorder(df):\n    {body}\n", fragment)


def test_sql_faked_clock_does_not_change_measured_seconds():
    fake = IDENTITY_SQL + '''
import time
time.perf_counter = lambda: 0.0
'''
    result = SQL.evaluate(fake)
    assert result.status == "ok"
    # The sandbox's supervisor times each call in its own process, so real (nonzero) seconds are measured.
    assert result.metrics["seconds"] > 0


# --------------------------------------------------------------------------- LB

def test_lb_baselines_rank_by_balancedness():
    initial, static = LB.evaluate(LB.initial_program), LB.evaluate(LB.baselines()["heuristic"])
    assert initial.status == static.status == "ok"
    assert static.metrics["balancedness"] < initial.metrics["balancedness"]
    assert static.combined_score < initial.combined_score
    bal, speed = initial.metrics["balancedness"], initial.metrics["speed"]
    assert initial.combined_score == pytest.approx((bal + 0.1 * speed) / 2)
    assert 0 < speed <= 1


def test_lb_balancedness_of_a_known_mapping():
    from contextevolve.tasks.eplb.task import balancedness

    load = np.array([[8.0, 2.0, 2.0]])
    phy2log = np.array([[0, 0, 1, 2]])
    logcnt = np.array([[2, 1, 1]])
    # slot loads 4, 4, 2, 2 -> mean 3 / max 4
    assert balancedness(load, phy2log, logcnt) == pytest.approx(0.75)


LB_HEAD = "import torch\n\ndef rebalance_experts(weight, num_replicas, num_groups, num_nodes, num_gpus):\n"
LB_VALID = LB.baselines()["heuristic"]


@pytest.mark.parametrize("body, fragment", [
    # every slot holds expert 0: the others have no replica
    ("    L, E = weight.shape\n    phy2log = torch.zeros(L, num_replicas, dtype=torch.int64)\n"
     "    logcnt = torch.zeros(L, E, dtype=torch.int64); logcnt[:, 0] = num_replicas\n"
     "    log2phy = torch.full((L, E, num_replicas), -1, dtype=torch.int64)\n"
     "    log2phy[:, 0, :] = torch.arange(num_replicas)\n    return phy2log, log2phy, logcnt\n",
     "has no replica"),
    # fewer slots than num_replicas
    ("    L, E = weight.shape\n    p = torch.arange(E).repeat(L, 1)\n"
     "    return p, p.unsqueeze(-1).clone(), torch.ones(L, E, dtype=torch.int64)\n", "expected (58, 288)"),
    # float tensors
    ("    L, E = weight.shape\n"
     "    return (torch.zeros(L, num_replicas), torch.zeros(L, E, 1), torch.ones(L, E))\n",
     "integer array"),
    # numpy arrays instead of tensors
    ("    import numpy as np\n"
     "    return np.zeros((58, 288), int), np.zeros((58, 256, 1), int), np.ones((58, 256), int)\n",
     "expected a torch tensor"),
])
def test_lb_cheats_are_rejected(body, fragment):
    assert_rejected(LB, LB_HEAD + body, fragment)


@pytest.mark.parametrize("edit, fragment", [
    ("    logcnt = torch.ones_like(logcnt)\n", "logcnt does not match"),          # under-reports replicas
    ("    log2phy[:, :, 0] = 0\n", "disagree"),                                   # all experts claim slot 0
    ("    log2phy = log2phy[:, :, :1].clone()\n", "lists 1 slots per expert"),     # drops the second replicas
    ("    log2phy[:, :, 1] = log2phy[:, :, 0]\n", "pad with exactly -1"),             # pads with slot ids
    # another negative
    ("    log2phy[log2phy < 0] = -2\n", "exactly -1 after each expert's logcnt slots, found -2"),
    ("    log2phy[:, :, 0] = -1\n", "followed by -1 padding"),                      # a listed slot is padding
])
def test_lb_inconsistent_maps_are_rejected(edit, fragment):
    source = LB_VALID.replace("    return phy2log, log2phy, logcnt\n",
                              edit + "    return phy2log, log2phy, logcnt\n")
    assert source != LB_VALID
    assert_rejected(LB, source, fragment)


# --------------------------------------------------------------------------- SAK (lower is better)

def test_sak_grader_on_synthetic_attention():
    from contextevolve.tasks.sparse_attention.task import attention_error, check_outputs

    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(1, 6, 4)), rng.normal(size=(1, 6, 4))
    pos = np.array([3, 4, 5])
    causal = np.arange(6)[None, :] <= pos[:, None]
    full = np.broadcast_to(causal, (2, 3, 6)).copy()
    err, kept, allowed = attention_error(q, k, v, pos, full, None)
    assert np.allclose(err, 0) and kept == allowed == 2 * (4 + 5 + 6)
    empty = np.zeros_like(full)
    assert np.allclose(attention_error(q, k, v, pos, empty, None)[0], 1.0)  # no keys: error 1
    one = empty.copy()
    one[:, :, 0] = True
    assert 0 < attention_error(q, k, v, pos, one, None)[0].mean() <= 1
    assert "future" in check_outputs(np.ones((2, 3, 6), bool), None, (2, 3, 6), pos)
    assert "bool" in check_outputs(full.astype(np.uint8), None, (2, 3, 6), pos)
    assert "non-negative" in check_outputs(full, -np.ones((2, 3, 6)), (2, 3, 6), pos)
    assert check_outputs(full, np.ones((2, 3, 6)), (2, 3, 6), pos) == ""


@needs_capture
def test_sak_baselines_and_orientation():
    initial, window = SAK.evaluate(SAK.initial_program), SAK.evaluate(SAK.baselines()["heuristic"])
    assert initial.status == window.status == "ok"
    assert not SAK.higher_is_better and SAK.better(initial.combined_score, window.combined_score)
    d, e = initial.metrics["density"], initial.metrics["error"]
    assert initial.combined_score == pytest.approx((d + e) / 2)
    sinks_only = '''
import numpy as np
def select_keys(queries, keys, values, query_positions):
    mask = np.zeros((queries.shape[0], queries.shape[1], keys.shape[1]), dtype=bool)
    mask[:, :, :2] = True
    return mask
'''
    poor = SAK.evaluate(sinks_only)
    assert poor.status == "ok" and SAK.better(initial.combined_score, poor.combined_score)
    assert SAK.evaluate(SAK.initial_program).metrics == initial.metrics  # seeded sampling: deterministic


SAK_HEAD = "import numpy as np\n\ndef select_keys(queries, keys, values, query_positions):\n" \
           "    H, Q, _ = queries.shape\n    T = keys.shape[1]\n"


@needs_capture
@pytest.mark.parametrize("body, fragment", [
    ("    return np.ones((H, Q, T), dtype=bool)\n", "future keys"),                    # peeks at the future
    ("    return np.zeros((H, Q, T), dtype=np.uint8)\n", "bool array"),
    ("    return np.zeros((H, Q, T // 2), dtype=bool)\n", "shape"),
    ("    m = np.zeros((H, Q, T), bool); m[:, :, 0] = True\n    return m, np.full((H, Q, T), np.nan)\n",
     "finite"),
    ("    return [[0]]\n", "expected a numpy array"),
])
def test_sak_cheats_are_rejected(body, fragment):
    assert_rejected(SAK, SAK_HEAD + body, fragment)


@pytest.mark.parametrize("task", [TS, SQL, LB, SAK], ids=lambda t: t.name)
def test_crashing_program_scores_worst(task):
    if task is SAK and not embedded.installed():
        pytest.skip("SAK data is captured from the embedded LLM")
    result = task.evaluate("import os\nos._exit(3)\n")
    assert result.status == "failed" and "code 3" in result.reason
    assert result.combined_score == task.worst_score


def test_timing_noise_is_not_an_improvement():
    """A copy that ran a few ms faster (measured: +0.000016 on LLM-SQL) is not better; a real gain is."""
    from contextevolve.tasks.llm_sql.task import score

    same_hits = score(0.4665, 0.080), score(0.4665, 0.076)
    assert same_hits[1] > same_hits[0] and not SQL.better(same_hits[1], same_hits[0])
    assert SQL.better(score(0.4700, 0.080), same_hits[0])  # 0.35 points more hit rate
    assert SQL.better(score(0.4665, 0.080), None) and not SQL.better(None, 0.0)
    assert LB.score_tolerance > 0 and not LB.better(0.14060, 0.14057)
    # tasks without a timing term compare exactly
    assert TS.score_tolerance == 0 and TS.better(2066.0 + 1e-9, 2066.0)
    assert SAK.score_tolerance == 0 and SAK.better(0.1 - 1e-9, 0.1)

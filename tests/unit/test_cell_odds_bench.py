"""benchmarks/cell_odds.py and benchmarks/replies_per_ask.py without an LLM.

What they read from stored runs, their figures, and what they refuse.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_bench", Path(__file__).parents[2] / "benchmarks"
                                                  / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (a dataclass looks its module up there)
    spec.loader.exec_module(module)
    return module


odds_bench = _load("cell_odds")
replies_bench = _load("replies_per_ask")


def _row(label, best_so_far, tokens):
    return {"system": label.rsplit("-s", 1)[0], "seed": 0, "label": label, "best_so_far": best_so_far,
            "cumulative_tokens": tokens}


def _folder(path: Path, rows, task="txn_scheduling", budget=1000, digest=None) -> Path:
    path.mkdir()
    settings = {"task": task, "token_budget": budget, **({"problem_digest": digest} if digest else {})}
    (path / "results.json").write_text(json.dumps({"settings": settings, "results": rows}))
    return path


def test_runs_cut_at_the_budget_and_a_label_read_once(tmp_path):
    a = _folder(tmp_path / "a", [_row("gepa-s0", [0.3, 0.3, 0.5, 0.5], [200, 500, 900, 1100]),
                                 _row("contextevolve-s0", [0.3, None, 0.3], [300, 700, 950])])
    b = _folder(tmp_path / "b", [_row("gepa-s0", [0.5], [10]), _row("contextevolve+best-s1", [0.3], [10])])
    runs, budget, task = odds_bench.load_runs([a, b], None)
    assert (budget, task) == (1000, "txn_scheduling")
    assert [(r.system, r.scores) for r in runs] == [
        ("gepa", [0.3, 0.3, 0.5]),  # the fourth candidate came after 1,000 tokens; b's gepa-s0 is a's
        ("contextevolve", [0.3, None, 0.3]), ("contextevolve+best", [0.3])]
    assert [len(r.scores) for r in odds_bench.load_runs([a], 10_000)[0]] == [4, 3]


def test_hazard_is_hits_over_candidates_until_each_hit(tmp_path):
    runs = [odds_bench.Run("gepa", "gepa-s0", [0.3, 0.3, 0.5, 0.5]),  # reached at candidate 3
            odds_bench.Run("gepa", "gepa-s1", [0.3] * 7)]  # never: 7 candidates of exposure
    o = odds_bench.odds(runs, 0.5)
    assert (o["reached"], o["reached_at"], o["exposure"], o["candidates"]) == (1, [3, None], 10, 5.5)
    assert o["hazard"] == pytest.approx(0.1)
    assert o["p_reach"] == pytest.approx(1 - 0.9 ** 5.5)
    assert o["needed"] == 22  # 1 - 0.9 ** 22 = 0.902 >= 0.9 > 1 - 0.9 ** 21
    none = odds_bench.odds([odds_bench.Run("x", "x-s0", [0.1, 0.2])], 0.5)
    assert (none["hazard"], none["p_reach"], none["needed"]) == (0.0, 0.0, None)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        odds_bench.odds(runs, 0.5, confidence=1.0)
    lower = odds_bench.odds([odds_bench.Run("x", "x-s0", [9.0, 7.0, 5.0])], 7.0, higher_is_better=False)
    assert (lower["reached_at"], lower["exposure"]) == ([2], 2)
    table = odds_bench.table(runs, 0.5)
    assert "| gepa | 2 | 1 | 3, - | 5.5 | 0.100 (1/10) | 0.44 | 22 |" in table


def test_main_prints_the_table_and_refuses_mixed_tasks_or_a_folder_without_results(tmp_path, capsys):
    a = _folder(tmp_path / "a", [_row("gepa-s0", [0.3, 0.5], [100, 200])], task="problem:/x", digest="d1")
    b = _folder(tmp_path / "b", [_row("gepa-s1", [0.3], [100])], task="problem:/y", digest="d1")
    assert odds_bench.main([str(a), str(b)]) == 0  # the same problem staged in two folders
    out = capsys.readouterr().out
    assert "target 0.5; budget 1000 tokens; 2 runs" in out and "| gepa | 2 | 1 | 2, - |" in out
    assert odds_bench.main([str(a), "--lower-is-better"]) == 0  # the default target is then the lowest
    assert "target 0.3;" in capsys.readouterr().out
    c = _folder(tmp_path / "c", [_row("gepa-s2", [0.3], [100])], task="model_placement")
    assert odds_bench.main([str(a), str(c)]) == 2
    assert "different tasks" in capsys.readouterr().err
    d = _folder(tmp_path / "d", [_row("gepa-s3", [0.3], [100])], task="problem:/z", digest="d1", budget=5)
    assert odds_bench.main([str(a), str(d)]) == 2
    assert "different token budgets ['1000', '5']: give --budget" in capsys.readouterr().err
    assert odds_bench.main([str(a), str(d), "--budget", "150", "--target", "0.5"]) == 0
    assert "| gepa | 2 | 0 | -, - | 1.0 |" in capsys.readouterr().out  # a's 0.5 came at 200 tokens: cut
    assert odds_bench.main([str(tmp_path / "none")]) == 2
    assert "holds no results.json" in capsys.readouterr().err


def test_replies_per_ask_replays_only_stored_first_asks(tmp_path, capsys):
    def row(role, content, attempt=1):
        messages = [{"type": "system", "content": "s"}, {"type": "human", "content": content}]
        return json.dumps({"role": role, "attempt": attempt, "messages": messages})

    first = "## Task\nx\n## Direction\nd\n## Your job\nj"
    (tmp_path / "prompts.jsonl").write_text("\n".join([
        row("navigator", "## Direction"), row("generator", first), row("generator", first, attempt=2),
        row("generator", "## What your last change did\nno effect"),
        row("generator", "## Reference programs\nr")]) + "\n")
    asks = replies_bench.first_asks([tmp_path])
    system = {"role": "system", "content": "s"}
    assert asks == [[system, {"role": "user", "content": first}],
                    [system, {"role": "user", "content": "## Reference programs\nr"}]]
    assert len(replies_bench.first_asks([tmp_path], limit=1)) == 1
    # rows that carry their request: by kind, whatever their words; one request's choices count once
    labelled = tmp_path / "labelled"
    labelled.mkdir()

    def of(kind, content, seed):
        return json.dumps(json.loads(row("generator", content)) | {"request": {"kind": kind, "seed": seed}})

    (labelled / "prompts.jsonl").write_text("\n".join([
        of("first", "plain", 1), of("first", "plain", 1), of("first", "plain", 1),
        of("second_ask", "## Direction", 2), of("first", "plain", 3)]) + "\n")
    assert [a[-1]["content"] for a in replies_bench.first_asks([labelled])] == ["plain", "plain"]
    with pytest.raises(FileNotFoundError, match="--log-prompts"):
        replies_bench.first_asks([tmp_path / "none"])
    assert replies_bench.main([str(tmp_path), "--n", "1"]) == 2
    assert "--n must be at least 2" in capsys.readouterr().err
    line = replies_bench.summary("1 x n", [{"texts": ["a", "b", "b"], "prompt": 900, "counted": 300,
                                            "reported": 100, "seconds": 30.0}])
    assert "replies   3 (distinct within an ask   2)" in line
    assert "completion    300 (reported    100)" in line
    assert "per reply:    400 tokens,  10.0 s" in line

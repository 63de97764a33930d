"""benchmarks/prefill.py: reading stored requests of every role in order, and the seconds table."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("prefill_bench", Path(__file__).parents[2] / "benchmarks" / "prefill.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_stored_requests_keep_every_role_in_order_as_openai_messages(tmp_path):
    rows = [{"role": "summarizer", "messages": [{"type": "system", "content": "S"}, {"type": "human", "content": "a"}]},
            {"role": "navigator", "messages": [{"type": "human", "content": "b"}]},
            {"role": "generator", "messages": [{"type": "human", "content": "c"}, {"type": "ai", "content": "d"},
                                               {"type": "human", "content": "e"}]}]
    (tmp_path / "prompts.jsonl").write_text("\n".join(map(json.dumps, rows)) + "\n")
    found = bench.stored_requests(tmp_path)
    assert [r["role"] for r in found] == ["summarizer", "navigator", "generator"]
    assert found[0]["messages"] == [{"role": "system", "content": "S"}, {"role": "user", "content": "a"}]
    assert [m["role"] for m in found[2]["messages"]] == ["user", "assistant", "user"]
    assert [r["role"] for r in bench.stored_requests(tmp_path, limit=2)] == ["summarizer", "navigator"]
    with pytest.raises(SystemExit, match="--log-prompts"):
        bench.stored_requests(tmp_path / "elsewhere")


def test_the_table_sums_seconds_by_role_and_the_saving_against_the_first_size():
    def result(cache_mb, seconds):
        roles = ["generator", "navigator", "generator"]
        return {"cache_mb": cache_mb, "peak_rss_mb": 1000.0 + cache_mb,
                "rows": [{"run": "r", "role": role, "prompt_tokens": 100, "seconds": s} for role, s in zip(roles, seconds)]}

    text = bench.table([result(0, [10.0, 6.0, 4.0]), result(150, [5.0, 6.0, 4.0])])
    lines = text.splitlines()
    assert lines[0] == "| cache MB | peak RSS MB | generator | navigator | all | saved |"
    assert lines[2] == "| 0 | 1000 | 2× 14 s | 1× 6 s | 20 s | 0 % |"
    assert lines[3] == "| 150 | 1150 | 2× 9 s | 1× 6 s | 15 s | 25 % |"

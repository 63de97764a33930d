"""benchmarks/sampler_stop.py: which stored requests it replays, and what it refuses."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from contextevolve.prompts import sampler

_spec = importlib.util.spec_from_file_location("sampler_stop_bench",
                                               Path(__file__).parents[2] / "benchmarks" / "sampler_stop.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_first_attempt_sampler_requests_with_their_k_and_candidate_count(tmp_path):
    candidates = [{"status": "ok", "score": 1.0, "abstract": f"idea {n}"} for n in range(4)]
    asked = [{"type": m.type, "content": m.content} for m in sampler.messages("parent", "go", candidates, 2)]

    def row(role, attempt=1):
        return json.dumps({"role": role, "attempt": attempt, "messages": asked if role == "sampler" else []})

    (tmp_path / "prompts.jsonl").write_text("\n".join([row("navigator"), row("sampler"), row("sampler", 2),
                                                       row("generator")]) + "\n")
    found = bench.sampler_requests(tmp_path)
    assert [(r["k"], r["candidates"], r["messages"]) for r in found] == [(2, 4, asked)]
    with pytest.raises(FileNotFoundError, match="--log-prompts"):
        bench.sampler_requests(tmp_path / "none")

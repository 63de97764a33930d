"""benchmarks/effectiveness.py: its report, and the switches that reach the run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("effectiveness_bench",
                                               Path(__file__).parents[2] / "benchmarks" / "effectiveness.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

def test_the_report_says_what_served_the_run():
    # records from before ``logits_all`` was recorded: their servers kept every token's logits
    figures = {"task": "txn_scheduling", "repair_attempts": 1, "repair_restart": True, "mode": "full",
               "iterations": 1, "valid": 1, "valid_rate": 1.0, "repairs_attempted": 0, "repairs_succeeded": 0,
               "precheck_stops": 0, "duplicates": 0, "improvements": 0, "initial": 2066.12, "best": 2066.12,
               "tokens_per_iteration": {"generator": 900.0}, "tokens_per_iteration_total": 900.0,
               "generator_completion_per_iteration": 400.0, "tokens_per_valid_child": 900.0,
               "seconds_per_iteration": 60.0, "median_seconds_per_iteration": 60.0,
               "median_generated_tokens_per_iteration": 400.0,
               "seconds_by_phase_per_iteration": {"generate": 50.0},
               "llm_by_role_per_iteration": {}, "statuses": ["ok"], "reasons": []}

    assert ("served by: embedded model, llama.cpp AVX512 build, prompt cache on, every token's "
            "logits\n") in bench.report({**figures, "prompt_cache": True,
                                         "llama_cpp_build": "CPU : AVX2 = 1 | AVX512 = 1"})
    assert ("served by: embedded model, llama.cpp AVX2, servers shared, navigator, generator, every token's "
            "logits\n") in bench.report(
        {**figures, "llama_cpp_build": "AVX2", "embedded_servers": ["shared", "navigator", "generator"]})
    assert "served by: embedded model, llama.cpp AVX2, one server\n" in bench.report(
        {**figures, "llama_cpp_build": "AVX2", "embedded_servers": ["shared"], "logits_all": False})
    assert "served by: embedded model, llama.cpp AVX2, one server, every token's logits\n" in bench.report(
        {**figures, "llama_cpp_build": "AVX2", "embedded_servers": ["shared"], "logits_all": True})
    native = {**figures, "llama_cpp_build": "AVX2", "embedded_servers": ["shared"], "logits_all": False,
              "server_kind": "native"}
    assert ("served by: embedded model, llama.cpp AVX2, llama.cpp's own server, 4 workers, one server\n"
            in bench.report({**native, "workers": 4}))
    # a record from before workers counted lanes: they are what workers are now
    assert ("served by: embedded model, llama.cpp AVX2, llama.cpp's own server, 4 workers, one server\n"
            in bench.report({**native, "lanes": 4}))
    assert ("served by: embedded model, llama.cpp AVX2, llama.cpp's own server, drafts ngram-simple, "
            "one server\n" in bench.report({**native, "workers": 1, "speculative": "ngram-simple"}))
    assert "served by: http://gpu-box:8000/v1\n" in bench.report({**figures, "endpoint": "http://gpu-box:8000/v1"})
    assert ("served by: embedded model, llama.cpp (build not recorded), every token's logits\n"
            in bench.report(figures))


class _Stop(Exception):
    """Raised by the stand-in for evolve, once it has seen its arguments."""


def _arguments(monkeypatch, tmp_path, argv) -> dict:
    """The keywords ``bench.main()`` run with ``argv`` gives ``evolve``."""
    import contextevolve.api
    seen = {}

    def fake_evolve(task, **kwargs):
        seen.update(kwargs)
        raise _Stop

    monkeypatch.setattr(contextevolve.api, "evolve", fake_evolve)
    monkeypatch.setattr("sys.argv", ["effectiveness.py", "--task", "txn_scheduling", "--run-dir",
                                     str(tmp_path / "run"), *argv])
    with pytest.raises(_Stop):
        bench.main()
    return seen


@pytest.mark.parametrize("argv, expected", [
    ([], {}),
    (["--stale-after", "0", "--unguided-hotter", "0"], {"stale_after": 0, "unguided_hotter": 0.0}),
    (["--stale-rest", "100", "--parent-selection", "tournament"],
     {"stale_rest": 100, "parent_selection": "tournament"}),
    (["--mutation", "reverse the order", "--mutation", "change a constant"],
     {"mutations": ("reverse the order", "change a constant")}),
])
def test_the_newer_search_switches_reach_the_run_only_when_given(monkeypatch, tmp_path, argv, expected):
    seen = _arguments(monkeypatch, tmp_path, argv)
    names = ("stale_after", "unguided_hotter", "stale_rest", "parent_selection", "mutations")
    assert {k: seen[k] for k in names if k in seen} == expected


def test_the_literal_switches_offer_their_settings_values():
    assert bench.choices("parent_selection") == ("pareto", "tournament", "best", "random")


def test_paper_agents_switch_off_every_new_part(monkeypatch, tmp_path):
    seen = _arguments(monkeypatch, tmp_path, ["--paper-agents"])
    assert {k: seen[k] for k in bench.PAPER_AGENTS} == {
        "behavioural_twins": False, "summarize_invalid": True, "navigator_sampler_share": 1.0}
    assert not any(k in _arguments(monkeypatch, tmp_path, []) for k in bench.PAPER_AGENTS)


def test_behaviourally_new_children_are_judged_alike_with_or_without_the_marks():
    task = bench.get_task("model_placement")
    ok = {"status": "ok", "metrics": {"max_kvpr": 21.0, "success_rate": 1.0}, "combined_score": 21.0}
    records = [{"id": "it00000", "iteration": 0, **ok, "outputs_digest": "a"},
               {"id": "it00001", "iteration": 1, **ok, "outputs_digest": "a"},  # unmarked twin (an old run)
               {"id": "it00002", "iteration": 2, **ok, "outputs_digest": "b", "combined_score": 22.0},
               {"id": "it00003", "iteration": 3, "status": "failed", "failure_kind": "runtime"},
               {"id": "it00004", "iteration": 4, **ok, "outputs_digest": "b", "combined_score": 22.0,
                "behavioural_twin_of": "it00002"}]
    assert bench.behaviourally_new(task, records) == 1


def test_the_workers_reach_the_run(monkeypatch, tmp_path):
    assert _arguments(monkeypatch, tmp_path, [])["workers"] == 1
    assert _arguments(monkeypatch, tmp_path, ["--workers", "3"])["workers"] == 3

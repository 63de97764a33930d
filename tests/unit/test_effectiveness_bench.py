"""benchmarks/effectiveness.py: what it records about the server that answered a run."""

from __future__ import annotations

import importlib.util
import platform
from pathlib import Path

import pytest

from contextevolve.graph.context import RunContext
from contextevolve.llm import embedded

_spec = importlib.util.spec_from_file_location("effectiveness_bench",
                                               Path(__file__).parents[2] / "benchmarks" / "effectiveness.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

ENDPOINT_VARIABLES = ("CONTEXTEVOLVE_BASE_URL", "OPENAI_BASE_URL")


@pytest.fixture
def no_endpoint_variables(monkeypatch):
    for name in ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_an_endpoint_from_the_flag_or_the_environment_is_recorded_by_its_url(monkeypatch, no_endpoint_variables):
    assert bench.served_by(RunContext(base_url="http://127.0.0.1:8000/v1")) == {"endpoint": "http://127.0.0.1:8000/v1"}
    monkeypatch.setenv("CONTEXTEVOLVE_BASE_URL", "http://gpu-box:8000/v1")
    assert bench.served_by(RunContext()) == {"endpoint": "http://gpu-box:8000/v1"}


def test_the_embedded_server_records_its_prompt_cache_as_started_and_its_build(monkeypatch, no_endpoint_variables):
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed")
    monkeypatch.setenv("CONTEXTEVOLVE_LLAMA_SERVER", "python")
    monkeypatch.delenv("CONTEXTEVOLVE_SPECULATIVE", raising=False)
    monkeypatch.setenv("CONTEXTEVOLVE_PROMPT_CACHE_MB", "0")
    off = bench.served_by(RunContext())
    monkeypatch.setenv("CONTEXTEVOLVE_PROMPT_CACHE_MB", "150")
    on = bench.served_by(RunContext())

    assert off["prompt_cache"] is False and on["prompt_cache"] is True
    assert off["embedded_servers"] == [embedded.SHARED, "navigator", "generator"]
    assert bench.served_by(RunContext(embedded_server_per_role=False))["embedded_servers"] == ["shared"]
    assert (off["server_kind"], off["lanes"], off["speculative"]) == ("python", 1, "none")  # it never drafts
    monkeypatch.setenv("CONTEXTEVOLVE_LLAMA_SERVER", "native")
    lanes = bench.served_by(RunContext(lanes=4))
    assert (lanes["server_kind"], lanes["lanes"], lanes["embedded_servers"]) == ("native", 4, ["shared"])
    assert lanes["speculative"] == "ngram-simple"
    monkeypatch.setenv("CONTEXTEVOLVE_SPECULATIVE", "none")
    assert bench.served_by(RunContext())["speculative"] == "none"
    monkeypatch.delenv("CONTEXTEVOLVE_LLAMA_SERVER")
    assert off["llama_cpp_build"].startswith("CPU :")
    if platform.machine() in ("x86_64", "AMD64"):
        assert "AVX2 = 1" in off["llama_cpp_build"]  # the Makefile's x86 builds all have AVX2 at least
    monkeypatch.delenv("CONTEXTEVOLVE_PROMPT_CACHE_MB")
    assert bench.served_by(RunContext())["prompt_cache"] is (embedded.PROMPT_CACHE_MB > 0)
    monkeypatch.setenv("CONTEXTEVOLVE_LOGITS_ALL", "1")
    assert bench.served_by(RunContext())["logits_all"] is True
    monkeypatch.delenv("CONTEXTEVOLVE_LOGITS_ALL")
    assert bench.served_by(RunContext())["logits_all"] is embedded.LOGITS_ALL is False


def test_without_llama_cpp_python_the_build_is_unknown_and_build_features_says_how_to_install(
        monkeypatch, no_endpoint_variables):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    with pytest.raises(embedded.EmbeddedModelError, match="llama-cpp-python is not installed"):
        embedded.build_features()
    assert bench.served_by(RunContext())["llama_cpp_build"].startswith("unknown (llama-cpp-python is not installed")


def test_the_report_says_what_served_the_run():
    # records from before ``logits_all`` was recorded: their servers kept every token's logits
    figures = {"task": "txn_scheduling", "repair_attempts": 1, "repair_restart": True, "mode": "full",
               "iterations": 1, "valid": 1, "valid_rate": 1.0, "repairs_attempted": 0, "repairs_succeeded": 0,
               "precheck_stops": 0, "duplicates": 0, "improvements": 0, "initial": 2066.12, "best": 2066.12,
               "tokens_per_iteration": {"generator": 900.0}, "tokens_per_iteration_total": 900.0,
               "generator_completion_per_iteration": 400.0, "tokens_per_valid_child": 900.0,
               "seconds_per_iteration": 60.0, "median_seconds_per_iteration": 60.0,
               "median_generated_tokens_per_iteration": 400.0, "seconds_by_phase_per_iteration": {"generate": 50.0},
               "llm_by_role_per_iteration": {}, "statuses": ["ok"], "reasons": []}

    assert ("served by: embedded model, llama.cpp CPU : AVX2 = 1 | AVX512 = 1, prompt cache on, every token's "
            "logits\n") in bench.report({**figures, "prompt_cache": True, "llama_cpp_build": "CPU : AVX2 = 1 | AVX512 = 1"})
    assert ("served by: embedded model, llama.cpp AVX2, servers shared, navigator, generator, every token's "
            "logits\n") in bench.report(
        {**figures, "llama_cpp_build": "AVX2", "embedded_servers": ["shared", "navigator", "generator"]})
    assert "served by: embedded model, llama.cpp AVX2, one server\n" in bench.report(
        {**figures, "llama_cpp_build": "AVX2", "embedded_servers": ["shared"], "logits_all": False})
    assert "served by: embedded model, llama.cpp AVX2, one server, every token's logits\n" in bench.report(
        {**figures, "llama_cpp_build": "AVX2", "embedded_servers": ["shared"], "logits_all": True})
    assert "served by: embedded model, llama.cpp AVX2, llama.cpp's own server, 4 lanes, one server\n" in bench.report(
        {**figures, "llama_cpp_build": "AVX2", "embedded_servers": ["shared"], "logits_all": False,
         "server_kind": "native", "lanes": 4})
    assert "served by: embedded model, llama.cpp AVX2, llama.cpp's own server, drafts ngram-simple, one server\n" in (
        bench.report({**figures, "llama_cpp_build": "AVX2", "embedded_servers": ["shared"], "logits_all": False,
                      "server_kind": "native", "lanes": 1, "speculative": "ngram-simple"}))
    assert "served by: http://gpu-box:8000/v1\n" in bench.report({**figures, "endpoint": "http://gpu-box:8000/v1"})
    assert "served by: embedded model, llama.cpp (build not recorded), every token's logits\n" in bench.report(figures)


class _Stop(Exception):
    """Raised by the stand-in for evolve, once it has seen its arguments."""


@pytest.mark.parametrize("argv, expected", [
    ([], {}),
    (["--stale-after", "0", "--unguided-hotter", "0"], {"stale_after": 0, "unguided_hotter": 0.0}),
])
def test_the_newer_search_switches_reach_the_run_only_when_given(monkeypatch, tmp_path, argv, expected):
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
    assert {k: seen[k] for k in ("stale_after", "unguided_hotter") if k in seen} == expected

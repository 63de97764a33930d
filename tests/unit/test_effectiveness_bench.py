"""benchmarks/effectiveness.py: what it records about the server that answered a run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from contextevolve.llm import embedded

_spec = importlib.util.spec_from_file_location("effectiveness_bench",
                                               Path(__file__).parents[2] / "benchmarks" / "effectiveness.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_another_endpoint_is_recorded_by_its_url():
    assert bench.served_by("http://127.0.0.1:8000/v1") == {"endpoint": "http://127.0.0.1:8000/v1"}


def test_the_embedded_server_records_its_prompt_cache_as_started_and_its_build(monkeypatch):
    if not embedded.installed():
        pytest.skip("llama-cpp-python or the model packages are not installed")
    monkeypatch.setenv("CONTEXTEVOLVE_PROMPT_CACHE_MB", "0")
    off = bench.served_by(None)
    monkeypatch.setenv("CONTEXTEVOLVE_PROMPT_CACHE_MB", "150")
    on = bench.served_by(None)

    assert off["prompt_cache"] is False and on["prompt_cache"] is True
    assert "AVX2 = 1" in off["llama_cpp_build"]  # the Makefile's builds all have AVX2 at least
    monkeypatch.delenv("CONTEXTEVOLVE_PROMPT_CACHE_MB")
    assert bench.served_by(None)["prompt_cache"] is (embedded.PROMPT_CACHE_MB > 0)


def test_build_features_without_llama_cpp_python_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    with pytest.raises(embedded.EmbeddedModelError, match="llama-cpp-python is not installed"):
        embedded.build_features()

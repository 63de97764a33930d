"""What serves a run's LLM calls: described, recorded in the run directory, and shown.

It is described from the settings and the environment, recorded in the run directory at each start,
and shown by ``status`` and ``run``.
"""

from __future__ import annotations

import importlib.util
import json
import platform

import pytest

from contextevolve.api import evolve, run_status
from contextevolve.graph.context import RunContext
from contextevolve.llm import embedded, serving

ENDPOINT_VARIABLES = ("CONTEXTEVOLVE_BASE_URL", "OPENAI_BASE_URL")


@pytest.fixture
def no_endpoint_variables(monkeypatch):
    for name in ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_an_endpoint_from_the_flag_or_the_environment_is_recorded_by_its_url(
        monkeypatch, no_endpoint_variables):
    assert serving.describe(RunContext(base_url="http://127.0.0.1:8000/v1")) == {"endpoint": "http://127.0.0.1:8000/v1"}
    monkeypatch.setenv("CONTEXTEVOLVE_BASE_URL", "http://gpu-box:8000/v1")
    assert serving.describe(RunContext()) == {"endpoint": "http://gpu-box:8000/v1"}


def test_the_embedded_server_records_its_prompt_cache_as_started_and_its_build(
        monkeypatch, no_endpoint_variables):
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed")
    monkeypatch.setenv("CONTEXTEVOLVE_LLAMA_SERVER", "python")
    monkeypatch.delenv("CONTEXTEVOLVE_SPECULATIVE", raising=False)
    monkeypatch.setenv("CONTEXTEVOLVE_PROMPT_CACHE_MB", "0")
    off = serving.describe(RunContext())
    monkeypatch.setenv("CONTEXTEVOLVE_PROMPT_CACHE_MB", "150")
    on = serving.describe(RunContext())

    assert off["prompt_cache"] is False and on["prompt_cache"] is True
    assert off["embedded_servers"] == [embedded.SHARED, "navigator", "generator"]
    assert serving.describe(RunContext(embedded_server_per_role=False))["embedded_servers"] == ["shared"]
    # it never drafts
    assert (off["server_kind"], off["workers"], off["speculative"]) == ("python", 1, "none")
    assert "lanes" not in off
    monkeypatch.setenv("CONTEXTEVOLVE_LLAMA_SERVER", "native")
    workers = serving.describe(RunContext(workers=4))
    assert (workers["server_kind"], workers["workers"], workers["embedded_servers"]) == (
        "native", 4, ["shared"])
    assert workers["speculative"] == "ngram-simple"
    monkeypatch.setenv("CONTEXTEVOLVE_SPECULATIVE", "none")
    assert serving.describe(RunContext())["speculative"] == "none"
    monkeypatch.delenv("CONTEXTEVOLVE_LLAMA_SERVER")
    assert off["llama_cpp_build"].startswith("CPU :")
    if platform.machine() in ("x86_64", "AMD64"):
        assert "AVX2 = 1" in off["llama_cpp_build"]  # the Makefile's x86 builds all have AVX2 at least
    monkeypatch.delenv("CONTEXTEVOLVE_PROMPT_CACHE_MB")
    assert serving.describe(RunContext())["prompt_cache"] is (embedded.PROMPT_CACHE_MB > 0)
    monkeypatch.setenv("CONTEXTEVOLVE_LOGITS_ALL", "1")
    monkeypatch.setenv("CONTEXTEVOLVE_LLAMA_SERVER", "python")
    assert serving.describe(RunContext())["logits_all"] is True
    monkeypatch.setenv("CONTEXTEVOLVE_LLAMA_SERVER", "native")  # keeps only the logits it samples from
    assert serving.describe(RunContext())["logits_all"] is False
    monkeypatch.delenv("CONTEXTEVOLVE_LOGITS_ALL")
    monkeypatch.setenv("CONTEXTEVOLVE_LLAMA_SERVER", "python")
    assert serving.describe(RunContext())["logits_all"] is embedded.LOGITS_ALL is False


def test_without_llama_cpp_python_the_build_is_unknown_and_build_features_says_how_to_install(
        monkeypatch, no_endpoint_variables):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    with pytest.raises(embedded.EmbeddedModelError, match="llama-cpp-python is not installed"):
        embedded.build_features()
    assert serving.describe(RunContext())["llama_cpp_build"].startswith(
        "unknown (llama-cpp-python is not installed")




def test_each_start_and_resume_of_a_run_is_recorded_and_status_shows_the_latest(tmp_path, models):
    run = tmp_path / "r"
    evolve("model_placement", iterations=1, run_dir=run, max_retries=0)
    evolve(iterations=2, run_dir=run, resume=True, max_retries=0)
    entries = run_status(run)["served_by"]

    assert [e["resumed"] for e in entries] == [False, True]
    assert all(e["endpoint"] is None and e["at"] for e in entries)  # the scripted chat models: no endpoint
    assert serving.text(entries[-1]) == "chat models given in code"


def test_a_cut_line_is_skipped_and_a_run_from_before_the_file_has_none(tmp_path):
    assert serving.recorded(tmp_path) == []
    serving.record(tmp_path, {"endpoint": "http://a:1/v1"}, resumed=False)
    with (tmp_path / serving.SERVED_BY_FILE).open("a") as f:
        f.write('{"endpoint": "http://b\n[1, 2]\n')  # a write cut short by a kill, then not an object
    serving.record(tmp_path, {"endpoint": "http://c:3/v1"}, resumed=True)

    assert [e["endpoint"] for e in serving.recorded(tmp_path)] == ["http://a:1/v1", "http://c:3/v1"]
    assert json.loads((tmp_path / serving.SERVED_BY_FILE).read_text().splitlines()[0])["resumed"] is False


def test_a_malformed_server_variable_stops_a_run_before_it_writes_anything(monkeypatch, tmp_path,
                                                                          no_endpoint_variables):
    monkeypatch.setenv("CONTEXTEVOLVE_LLAMA_SERVER", "vllm")
    with pytest.raises(embedded.EmbeddedModelError, match="CONTEXTEVOLVE_LLAMA_SERVER must be one of"):
        evolve("model_placement", iterations=1, run_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_the_line_names_the_server_its_drafts_and_its_layout():
    native = {"server_kind": "native", "speculative": "ngram-simple", "prompt_cache": False,
              "logits_all": False, "llama_cpp_build": "CPU : AVX2 = 1", "workers": 1,
              "embedded_servers": ["shared", "navigator", "generator"]}
    assert serving.text(native) == ("embedded model, llama.cpp AVX2 build, llama.cpp's own server, drafts "
                                    "ngram-simple, servers shared, navigator, generator")
    python = {**native, "server_kind": "python", "speculative": "none", "logits_all": True, "workers": 2,
              "embedded_servers": ["shared"]}
    assert serving.text(python) == ("embedded model, llama.cpp AVX2 build, llama-cpp-python's server, "
                                     "2 workers, one server, every token's logits")
    # a record written before workers counted its lanes: read as workers
    older = {k: v for k, v in python.items() if k != "workers"}
    assert serving.text({**older, "lanes": 2}) == serving.text(python)
    assert serving.text({**older, "lanes": 1}) == serving.text({**python, "workers": 1})
    assert serving.text({"endpoint": "http://gpu-box:8000/v1"}) == "http://gpu-box:8000/v1"


def test_the_line_names_the_widest_vector_extension_of_the_build():
    avx512 = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
              "AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | LLAMAFILE = 1 | "
              "OPENMP = 1 | REPACK = 1 |")
    assert serving.build_text(avx512) == "AVX512 build"
    assert serving.build_text(
        "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | AVX512 = 0 | OPENMP = 1 |") == "AVX2 build"
    assert serving.build_text("CPU : NEON = 1 | ARM_FMA = 1 | OPENMP = 1 |") == "NEON build"
    assert serving.build_text("CPU : LLAMAFILE = 1 | OPENMP = 1 |") == "build without AVX/NEON"
    unknown = "unknown (llama-cpp-python is not installed)"
    assert serving.build_text(unknown) == unknown
    assert serving.build_text(None) == "None"  # a hand-edited served_by.jsonl must not stop `status`
    assert serving.text({"server_kind": "native", "llama_cpp_build": avx512}).startswith(
        "embedded model, llama.cpp AVX512 build, llama.cpp's own server")

"""benchmarks/prefill.py: reading stored requests of every role in order, and the seconds table."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from contextevolve.llm import embedded

_spec = importlib.util.spec_from_file_location("prefill_bench",
                                               Path(__file__).parents[2] / "benchmarks" / "prefill.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_stored_requests_keep_every_role_in_order_as_openai_messages(tmp_path):
    rows = [{"role": "summarizer", "messages": [{"type": "system", "content": "S"},
                                                {"type": "human", "content": "a"}]},
            {"role": "navigator", "messages": [{"type": "human", "content": "b"}]},
            {"role": "generator", "messages": [{"type": "human", "content": "c"},
                                               {"type": "ai", "content": "d"},
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
        return {"cache_mb": cache_mb, "layout": "shared", "logits": "last", "peak_rss_mb": 1000.0 + cache_mb,
                "anon_mb": 500.0,
                "rows": [{"run": "r", "role": role, "prompt_tokens": 100, "seconds": s}
                         for role, s in zip(roles, seconds)]}

    text = bench.table([result(0, [10.0, 6.0, 4.0]), result(150, [5.0, 6.0, 4.0])])
    lines = text.splitlines()
    assert lines[0] == ("| cache MB | layout | logits | peak RSS MB (sum) | anonymous MB (sum) | generator "
                        "| navigator | all | saved |")
    assert lines[2] == "| 0 | shared | last | 1000 | 500 | 2× 14 s | 1× 6 s | 20 s | 0 % |"
    assert lines[3] == "| 150 | shared | last | 1150 | 500 | 2× 9 s | 1× 6 s | 15 s | 25 % |"
    old = result(0, [10.0, 6.0, 4.0])
    del old["logits"]  # replays stored before the setting existed kept every token's logits
    assert bench.table([old]).splitlines()[2].startswith("| 0 | shared | all | 1000 |")


class _Server:
    """Stands in for the embedded server: a port per instance, launched and stopped."""

    started: list[_Server] = []

    def __init__(self):
        self.port, self.pid, self.stopped, self.args = 9000 + len(_Server.started), None, False, None
        _Server.started.append(self)

    def launch(self):
        self.args = embedded.logits_args()  # what a real server's command line says: read at launch
        self.kind = embedded.server_kind()

    def wait_ready(self):
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self):
        self.stopped = True


class _Client:
    """Stands in for the OpenAI client: records which server each request went to."""

    sent: list[tuple[str, str]] = []

    def __init__(self, base_url, **_):
        self.chat = self
        self.completions = self
        self.base_url = base_url

    def create(self, *, messages, **_):
        from types import SimpleNamespace

        _Client.sent.append((self.base_url, messages[0]["content"]))
        return SimpleNamespace(usage=SimpleNamespace(prompt_tokens=len(messages[0]["content"])))


@pytest.mark.parametrize("layout, servers", [("shared", 1), ("per_role", 3)])
def test_a_replay_sends_each_request_to_its_layouts_server_in_order(monkeypatch, layout, servers):
    _Server.started, _Client.sent = [], []
    monkeypatch.setenv("CONTEXTEVOLVE_PROMPT_CACHE_MB", "7")
    monkeypatch.delenv("CONTEXTEVOLVE_LOGITS_ALL", raising=False)
    monkeypatch.setattr(bench.embedded, "EmbeddedServer", _Server)
    monkeypatch.setattr(bench, "OpenAI", _Client)
    requests = [{"run": "r", "role": role, "messages": [{"role": "user", "content": text}]}
                for role, text in [("navigator", "n1"), ("generator", "g1"), ("navigator", "n2"),
                                   ("summarizer", "s1"), ("sampler", "p1")]]
    result = bench.replay(requests, 0, layout)
    assert [text for _, text in _Client.sent] == ["n1", "g1", "n2", "s1", "p1"]
    assert len(_Server.started) == servers and all(s.stopped for s in _Server.started)
    urls = [url for url, _ in _Client.sent]
    if layout == "per_role":  # the Navigator's, the Generator's, and one for the Summarizer and the Sampler
        assert urls[0] == urls[2] and len({urls[0], urls[1], urls[3]}) == 3 and urls[3] == urls[4]
    else:
        assert len(set(urls)) == 1
    assert result["layout"] == layout and [r["prompt_tokens"] for r in result["rows"]] == [2] * 5
    assert {s.kind for s in _Server.started} == {"python"}  # the server whose settings it measures
    # the servers' settings were the replay's only while they were launched
    assert os.environ["CONTEXTEVOLVE_PROMPT_CACHE_MB"] == "7" and "CONTEXTEVOLVE_LOGITS_ALL" not in os.environ


@pytest.mark.parametrize("logits, flag", [("last", "False"), ("all", "True")])
def test_a_replay_starts_its_servers_with_its_logits_setting(monkeypatch, logits, flag):
    _Server.started, _Client.sent = [], []
    monkeypatch.setenv("CONTEXTEVOLVE_PROMPT_CACHE_MB", "0")
    monkeypatch.setenv("CONTEXTEVOLVE_LOGITS_ALL", "1" if logits == "last" else "0")  # the other setting
    monkeypatch.setattr(bench.embedded, "EmbeddedServer", _Server)
    monkeypatch.setattr(bench, "OpenAI", _Client)
    result = bench.replay([{"run": "r", "role": "generator", "messages": [{"role": "user", "content": "g"}]}],
                          0, "shared", logits)
    assert result["logits"] == logits and _Server.started[0].args == ["--logits_all", flag]

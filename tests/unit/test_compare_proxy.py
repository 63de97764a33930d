"""The counting proxy of `contextevolve compare`: exact token counts, streamed or not."""

from __future__ import annotations

import json

import pytest
from openai import OpenAI

from contextevolve.compare.proxy import CountingProxy
from tests.fake_endpoint import FakeEndpoint, words

MESSAGES = [{"role": "system", "content": "You write code."},
            {"role": "user", "content": "Sort three numbers please"}]


def answer(body: dict) -> str:
    return "def f(xs): return sorted(xs)"


def test_plain_and_streamed_requests_are_counted_from_the_endpoints_usage(tmp_path):
    with (FakeEndpoint(answer) as endpoint,
          CountingProxy(endpoint.url, log_path=tmp_path / "requests.jsonl") as proxy):
        client = OpenAI(base_url=proxy.url("contextevolve-s0"), api_key="none")
        plain = client.chat.completions.create(model="fake", messages=MESSAGES, seed=7)
        stream = client.chat.completions.create(model="fake", messages=MESSAGES, seed=7, stream=True,
                                                stream_options={"include_usage": True})
        chunks = list(stream)
        other = OpenAI(base_url=proxy.url("gepa-s0"), api_key="none")
        other.completions.create(model="fake", prompt="one two three")
        assert plain.choices[0].message.content == answer({})
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == answer({})
        assert chunks[-1].usage.completion_tokens == words(answer({}))
        prompt_words = words("You write code.\nSort three numbers please")
        records = proxy.records("contextevolve-s0")
        assert [r.streamed for r in records] == [False, True]
        assert all((r.prompt_tokens, r.completion_tokens) == (prompt_words, words(answer({})))
                   for r in records)
        assert proxy.totals("contextevolve-s0") == {
            "requests": 2, "prompt_tokens": 2 * prompt_words, "completion_tokens": 2 * words(answer({})),
            "total_tokens": 2 * (prompt_words + words(answer({}))), "unreported": 0}
        assert proxy.totals("gepa-s0")["prompt_tokens"] == 3
        assert not any(body.get("stream") for body in endpoint.requests)  # never streamed upstream
        # identical prompts with the same seed get distinct seeds upstream
        seeds = [body["seed"] for body in endpoint.requests[:2]]
        assert len(set(seeds)) == 2 and 7 not in seeds
    logged = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert [r["label"] for r in logged] == ["contextevolve-s0", "contextevolve-s0", "gepa-s0"]


def test_seed_policy_remove_overrides_and_upstream_errors_are_recorded():
    def refuse(body: dict) -> str:
        raise RuntimeError("boom")  # the fake endpoint answers 500

    with FakeEndpoint(answer) as endpoint, CountingProxy(endpoint.url, seed_policy="remove",
                                                         overrides={"top_k": 20}) as proxy:
        OpenAI(base_url=proxy.url("x"), api_key="none").chat.completions.create(
            model="fake", messages=MESSAGES, seed=3)
        assert "seed" not in endpoint.requests[0] and endpoint.requests[0]["top_k"] == 20
    with FakeEndpoint(refuse) as endpoint, CountingProxy(endpoint.url) as proxy:
        client = OpenAI(base_url=proxy.url("x"), api_key="none", max_retries=0)
        with pytest.raises(Exception):
            client.chat.completions.create(model="fake", messages=MESSAGES)
        [record] = proxy.records("x")
        assert record.status == 500 and record.total_tokens == 0 and not record.usage_reported
        assert proxy.totals("x")["unreported"] == 0


def test_bad_settings_are_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="seed_policy"):
        CountingProxy("http://127.0.0.1:1/v1", seed_policy="fixed")
    proxy = CountingProxy("http://127.0.0.1:1/v1")
    with pytest.raises(RuntimeError, match="not running"):
        proxy.url("a")
    with proxy:
        with pytest.raises(ValueError, match="path segment"):
            proxy.url("a/b")

"""The run transcript (``RUN_DIR/prompts.jsonl``): what :func:`record` writes, :func:`read` gives back."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from contextevolve.llm import transcript


def test_read_gives_back_the_recorded_rows_in_order_and_honours_limit(tmp_path):
    messages = [SystemMessage("you write code"), HumanMessage("improve ü")]
    transcript.record(tmp_path, "navigator", 1, messages, "guide",
                      {"navigator": {"prompt": 10, "completion": 2}}, False)
    transcript.record(tmp_path, "generator", 2, messages, "```python\n```",
                      {"generator": {"prompt": 30, "completion": 9}}, True)

    rows = transcript.read(tmp_path)

    assert [(r["role"], r["attempt"], r["reply"], r["truncated"]) for r in rows] == [
        ("navigator", 1, "guide", False), ("generator", 2, "```python\n```", True)]
    assert rows[1]["messages"] == [{"type": "system", "content": "you write code"},
                                   {"type": "human", "content": "improve ü"}]
    assert rows[1]["usage"] == {"generator": {"prompt": 30, "completion": 9}}
    assert [r["role"] for r in transcript.read(tmp_path, limit=1)] == ["navigator"]


def test_read_of_a_run_without_a_transcript_names_the_file_and_the_flag(tmp_path):
    with pytest.raises(FileNotFoundError,
                       match=r"prompts\.jsonl does not exist: record the run with --log-prompts"):
        transcript.read(tmp_path)


def test_a_generator_request_is_kept_with_its_kind_seed_and_sampling(tmp_path):
    """A run's Generator request goes to the transcript as data, so a replay sends what the run sent."""
    from contextevolve.graph.context import RunContext
    from contextevolve.llm.models import use_chat_models
    from contextevolve.loop import requests
    from contextevolve.loop.policy import SearchPolicy
    from tests.fakes import BETTER_PROGRAM, INITIAL, fenced, reply, scripted

    ctx = RunContext(run_dir=str(tmp_path), log_prompts=True, max_retries=0, seed=3)
    request = requests.first(SearchPolicy.of(ctx, 2), [HumanMessage("improve")], "", base=INITIAL)
    with use_chat_models(generator=scripted(reply(fenced(BETTER_PROGRAM)))):
        outcome, = requests.send(ctx, request)
    row, = transcript.read(tmp_path)
    assert outcome.source and row["request"] == request.label()
    assert (row["request"]["kind"], row["request"]["seed"], row["request"]["n"]) == ("first", 3 + 300 + 2, 1)
    assert row["request"]["temperature"] == pytest.approx(request.temperature)

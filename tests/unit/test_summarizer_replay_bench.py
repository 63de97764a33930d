"""benchmarks/summarizer_replay.py: the stored requests it reads, how it re-renders them, what it refuses."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from contextevolve.prompts import summarizer

_spec = importlib.util.spec_from_file_location(
    "summarizer_replay_bench", Path(__file__).parents[2] / "benchmarks" / "summarizer_replay.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

CODE = 'def place(n):\n    """Put each model on a GPU."""\n    return {}\n'


def _stored(messages) -> list[dict]:
    return [{"type": m.type, "content": m.content} for m in messages]


def _transcript(tmp_path, *requests) -> Path:
    rows = [{"role": "navigator", "attempt": 1, "messages": []}]
    rows += [{"role": "summarizer", "attempt": attempt, "messages": _stored(m)} for m, attempt in requests]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def test_requests_are_read_into_their_parts_and_rendered_again(tmp_path):
    initial = summarizer.messages("Model Placement (MP)", CODE, None, "inherited")
    child = summarizer.messages("Model Placement (MP)", CODE, "Greedy. Sorts.", "novel_only", "max_kvpr 3.2")
    retried = summarizer.messages("Model Placement (MP)", "x = 1\n", "Other.", "inherited")
    found = bench.summarizer_requests(_transcript(tmp_path, (initial, 1), (child, 1), (retried, 2)))
    assert [(r["parent"], r["code"], r["feedback"], r["novel_only"]) for r in found] == [
        (None, CODE, "", False), ("Greedy. Sorts.", CODE, "max_kvpr 3.2", True)]
    for request, sent in zip(found, (initial, child)):
        assert bench.messages_for(request, {}) == sent                     # stored bytes
        assert bench.messages_for(request, {"prompt": "current"}) == sent  # today's prompt renders them again
    for values in ({"nodoc": 1}, {"prompt": "current", "nodoc": 1}):
        shown = bench.messages_for(found[1], values)[-1].content
        assert "Put each model" not in shown and "return {}" in shown and "Greedy. Sorts." in shown


@pytest.mark.parametrize("title, code, parent, feedback", [
    ("Transaction Scheduling (TS). Makespan", "x = 1", "Greedy.\nEarlier versions failed (1 repaired): a.",
     ""),
    ("T", 'S = """\n```\n\nnot a fence\n"""\n', "P.", "line one\n\nline three\n"),
    ("T", CODE, "P.", "max_kvpr 3.2\n\n"),
])
def test_hard_layouts_are_read_back(tmp_path, title, code, parent, feedback):
    sent = summarizer.messages(title, code, parent, "inherited", feedback)
    [request] = bench.summarizer_requests(_transcript(tmp_path, (sent, 1)))
    assert bench.messages_for(request, {"prompt": "current"}) == sent
    assert request["parent"] == parent and request["title"] == title


def test_what_it_refuses(tmp_path):
    with pytest.raises(FileNotFoundError, match="--log-prompts"):
        bench.summarizer_requests(tmp_path / "none")
    odd = [summarizer.messages("T", CODE, None, "inherited")[0], summarizer.messages("T", CODE, None, "x")[1]]
    odd[1].content = "Summarize this."
    with pytest.raises(ValueError, match="cannot read"):
        bench.summarizer_requests(_transcript(tmp_path, (odd, 1)))
    for text, message in (("a=cap=x", "cap must be int"), ("=cap=1", "give it a name"),
                          ("a=temp=1", "unknown key"), ("a=prompt=new", "prompt must")):
        with pytest.raises(ValueError, match=message):
            bench.parse_config(text)
    assert bench.parse_config("new=prompt=current,cap=120") == ("new", {"prompt": "current", "cap": 120})


def test_the_parent_comes_from_the_runs_programs_and_older_changed_lines_are_read(tmp_path):
    parent = "def place(n):\n    return None\n"
    records = [{"id": "it00000", "source": parent}, {"id": "it00001", "parent_id": "it00000", "source": CODE}]
    (tmp_path / "programs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    sent = summarizer.messages("T", "def place(n):\n    return {}\n", "Returns nothing.", "inherited")
    # a run that showed the Summarizer the changed lines (a deleted setting) stored them after the code
    older = [sent[0], type(sent[1])(sent[1].content.replace(
        "```\n\n", "```\n\nLines it changed in the parent's code (- taken out, + put in):\n"
        "    - return None\n    + return {}\n\n", 1))]
    [request, old] = bench.summarizer_requests(_transcript(tmp_path, (sent, 1), (older, 1)))
    assert request["parent_code"] == parent == old["parent_code"]  # matched by the code, without docstrings
    assert bench.messages_for(old, {}) == older  # stored bytes
    assert bench.messages_for(old, {"prompt": "current"}) == sent == bench.messages_for(request, {})


def test_what_an_abstract_is_judged_on():
    assert bench.copies_changed("Changed: packs by size. Kept: heap.", "Changed: packs by size. Kept: sort.")
    assert not bench.copies_changed("Changed: sorts by rate. Kept: heap.", "Changed: packs by size.")
    assert not bench.copies_changed("Packs by size.", "Packs by size.")  # no Changed sentence: no copy of it
    parent, child = "def f(s):\n    return min(s)\n", "def f(s):\n    return min(s, key=last_access)\n"
    assert bench.names_a_change("Changed: evicts by last access. Kept: min.", parent, child)
    assert not bench.names_a_change("Changed: evicts the minimum. Kept: min.", parent, child)


def test_echo_is_a_first_sentence_taken_from_the_parent():
    assert bench.echoes("Greedy. Packs by size.", "Sorts. Greedy.")
    assert not bench.echoes("Packs by size. Greedy.", "Sorts. Greedy.")
    assert not bench.echoes("Greedy.", None)

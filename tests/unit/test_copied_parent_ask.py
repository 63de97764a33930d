"""A child of a parent the model just copied is asked for by one named mutation alone (copied_parent_ask)."""

from __future__ import annotations

import json

import pytest

from contextevolve.api import evolve
from contextevolve.graph.state import ITERATION_FIELDS
from contextevolve.llm.models import use_chat_models
from contextevolve.memory.records import ProgramRecord
from contextevolve.nodes.select_parent import last_child_copied
from contextevolve.tasks.registry import get_task
from tests.fakes import BETTER_PROGRAM, INITIAL, default_models, fenced, reply, scripted

TASK = get_task("model_placement")


def run(tmp_path, generator, iterations=2, **settings):
    models = default_models()
    models["generator"] = generator
    with use_chat_models(**models):
        evolve("model_placement", iterations=iterations, run_dir=tmp_path / "r", max_retries=0,
               parent_selection="best", **settings)
    records = [json.loads(line) for line in (tmp_path / "r" / "programs.jsonl").read_text().splitlines()]
    return records, models


def _child(pid, parent, kind="", status="ok"):
    return ProgramRecord(id=pid, iteration=int(pid[2:]), parent_id=parent, status=status, failure_kind=kind)


def test_last_child_copied_reads_the_parents_last_child_only():
    records = [ProgramRecord(id="it00000", iteration=0), _child("it00001", "it00000", "twin", "failed"),
               _child("it00002", "it00001"), _child("it00003", "it00000", "edit", "failed"),
               _child("it00004", "it00001", "twin", "failed")]
    assert not last_child_copied(records, "it00000")  # its last child failed to build, not a copy
    assert last_child_copied(records, "it00001")
    assert not last_child_copied(records, "it00002")  # no child
    assert not last_child_copied(records[:4], "it00001")
    assert "ask" in ITERATION_FIELDS  # claim resets it: the next child is asked for in full again


def _copies_then(second_child: str):
    # child 1: the first ask and the second ask both give the initial program back (a code twin)
    return scripted(reply(fenced(INITIAL), 1500, 500), reply(fenced(INITIAL), 700, 300),
                    reply(fenced(second_child), 650, 250), reply(fenced(second_child), 640, 240), cycle=False)


def test_a_copied_parents_next_child_is_one_mutation_ask(tmp_path):
    generator = _copies_then(BETTER_PROGRAM)
    records, models = run(tmp_path, generator, copied_parent_ask="mutation")
    copy, child = records[1], records[2]
    assert copy["failure_kind"] == "twin" and child["parent_id"] == copy["parent_id"] == "it00000"
    # one request, the second ask's: the parent without its docstrings and one named change
    assert len(generator.seen) == 3
    ask = generator.seen[2][1].content
    assert "Make one concrete change" in ask
    assert "## Reference programs" not in ask and "## Direction" not in ask
    assert [(c["phase"], c["role"]) for c in child["llm_calls"]] == [("generate", "generator"),
                                                                     ("summarize", "summarizer")]
    assert child["guidance"] == "" and child["exemplar_ids"] == [] and child["trajectory_ids"] == []
    assert child["tokens"]["generator"] == {"prompt": 650, "completion": 250}
    # the child was evaluated on our side
    assert child["status"] == "ok" and child["source"] == BETTER_PROGRAM
    assert child["combined_score"] == pytest.approx(TASK.evaluate(BETTER_PROGRAM).combined_score)


def test_a_mutation_ask_that_copies_gets_no_further_ask(tmp_path):
    generator = _copies_then(INITIAL)
    records, _ = run(tmp_path, generator, copied_parent_ask="mutation")
    assert len(generator.seen) == 3
    assert records[2]["failure_kind"] == "twin" and records[2]["tokens"]["generator"] == {
        "prompt": 650, "completion": 250}


def test_full_keeps_the_composed_ask(tmp_path):
    generator = _copies_then(BETTER_PROGRAM)
    records, _ = run(tmp_path, generator)  # the default: full
    assert len(generator.seen) == 3
    assert "Make one concrete change" not in generator.seen[2][1].content
    assert records[2]["status"] == "ok"
    assert records[2]["tokens"]["generator"] == {"prompt": 650, "completion": 250}


def test_a_mutation_ask_asks_nobody_for_a_guidance_it_would_not_follow(tmp_path):
    from langgraph.runtime import Runtime

    from contextevolve.graph.context import RunContext
    from contextevolve.graph.state import WorkerState
    from contextevolve.nodes.review import review

    runtime = Runtime(context=RunContext(run_dir=str(tmp_path / "r"), review_guidance=True))
    state = WorkerState(worker=0, child_id="it00002", parent_id="it00000", ask="mutation")
    assert review(state, runtime) == {}  # no interrupt (outside a graph one would raise)
    with pytest.raises(RuntimeError):  # the same state asking in full would pause for a person
        review(WorkerState(worker=0, child_id="it00002", parent_id="it00000"), runtime)

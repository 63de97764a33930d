"""Behavioural twins: valid children whose change had no effect on any result."""

from __future__ import annotations

import json

import pytest

from contextevolve.api import evolve, run_status
from contextevolve.evaluation.results import CallResult, outputs_digest
from contextevolve.llm.models import use_chat_models
from contextevolve.loop.behaviour import behavioural_twin, same_results
from contextevolve.memory.records import ProgramRecord
from contextevolve.nodes.select_parent import stale_parents
from contextevolve.report import write_report
from contextevolve.tasks.registry import get_task
from tests.fakes import BETTER_PROGRAM, INITIAL, default_models, fenced, reply, scripted

TASK = get_task("model_placement")
#: The initial program with a local variable renamed: other code, the same placements.
RENAMED = INITIAL.replace("kvpr", "pressure")


def run(tmp_path, generator, iterations=1, **settings):
    models = default_models()
    models["generator"] = generator
    with use_chat_models(**models):
        result = evolve("model_placement", iterations=iterations, run_dir=tmp_path / "r", max_retries=0,
                        **settings)
    records = [json.loads(line) for line in (tmp_path / "r" / "programs.jsonl").read_text().splitlines()]
    return result, records, models


def test_outputs_digest_is_what_the_calls_returned():
    a = [CallResult("ok", 0.1, value={"placement": [1, 2]}), CallResult("ok", 0.2, blobs={"x": b"\x01"})]
    same_slower = [CallResult("ok", 9.0, value={"placement": [1, 2]}),
                   CallResult("ok", 1.0, blobs={"x": b"\x01"})]
    other = [CallResult("ok", 0.1, value={"placement": [2, 1]}), CallResult("ok", 0.2, blobs={"x": b"\x01"})]
    other_blob = [CallResult("ok", 0.1, value={"placement": [1, 2]}),
                  CallResult("ok", 0.2, blobs={"x": b"\x02"})]
    assert outputs_digest(a) == outputs_digest(same_slower)  # timings are not outputs
    assert len({outputs_digest(a), outputs_digest(other), outputs_digest(other_blob)}) == 3
    assert outputs_digest([CallResult("ok", 0.1, value=object())])  # never raises on odd values


def _ok(pid, metrics, score, digest=""):
    return ProgramRecord(id=pid, iteration=int(pid[2:]), status="ok", metrics=metrics, combined_score=score,
                         outputs_digest=digest)


def test_same_results_by_outputs_when_both_have_them_else_by_every_metric_to_the_bit():
    eplb = get_task("eplb")  # a timed task: its score tolerates timing noise
    parent = _ok("it00000", {"balancedness": 0.5, "speed": 0.9}, 0.7, "d1")
    assert same_results(eplb, _ok("it00001", {"balancedness": 0.5, "speed": 0.9002}, 0.7001, "d1"), parent)
    # the same outputs much slower: a decline, not a twin
    assert not same_results(eplb, _ok("it00001", {"balancedness": 0.5, "speed": 0.8}, 0.65, "d1"), parent)
    # the same outputs computed faster beyond the tolerance: an improvement, not a twin
    assert not same_results(eplb, _ok("it00001", {"balancedness": 0.5, "speed": 1.0}, 0.75, "d1"), parent)
    # other outputs with every result equal to the bit: the change had no effect on any result
    assert same_results(eplb, _ok("it00001", {"balancedness": 0.5, "speed": 0.9}, 0.7, "d2"), parent)
    assert not same_results(eplb, _ok("it00001", {"balancedness": 0.5, "speed": 0.9}, 0.7001, "d2"), parent)
    # without digests (a user's problem, an older run) every metric must be equal to the bit
    bare = _ok("it00000", {"m": 0.1 + 0.2}, 0.3)
    assert same_results(TASK, _ok("it00001", {"m": 0.1 + 0.2}, 0.3), bare)
    assert not same_results(TASK, _ok("it00001", {"m": 0.3}, 0.3), bare)  # 0.30000000000000004 != 0.3
    failed = ProgramRecord(id="it00002", iteration=2, status="failed", metrics=bare.metrics,
                           combined_score=0.3)
    assert not same_results(TASK, failed, bare)
    # the first program with a behaviour of its own is named, never a twin's
    twin = _ok("it00003", {"m": 0.1 + 0.2}, 0.3).model_copy(update={"behavioural_twin_of": "it00000"})
    assert behavioural_twin(TASK, _ok("it00004", {"m": 0.1 + 0.2}, 0.3), twin, [bare]) == "it00000"


def test_stale_parents_count_behavioural_twins():
    parent = _ok("it00000", {}, 1.0)
    twins = [ProgramRecord(id=f"it0000{i}", iteration=i, parent_id="it00000", status="ok",
                           behavioural_twin_of="it00000") for i in (1, 2)]
    copy = ProgramRecord(id="it00003", iteration=3, parent_id="it00000", status="failed", failure_kind="twin")
    assert stale_parents([parent, *twins], 2) == {"it00000"}
    assert stale_parents([parent, twins[0], copy], 2) == {"it00000"}
    assert stale_parents([parent, twins[0]], 2) == set()


def test_a_child_with_no_effect_is_asked_again_and_the_new_child_replaces_it(tmp_path):
    generator = scripted(reply(fenced(RENAMED), 900, 400), reply(fenced(BETTER_PROGRAM), 700, 300),
                         cycle=False)
    result, records, models = run(tmp_path, generator)
    child = records[1]
    # the renamed program ran, scored exactly the initial's, and the Generator was told so
    assert [a["method"] for a in child["attempts"]] == ["no_effect"]
    attempt = child["attempts"][0]
    assert attempt["status"] == "ok" and attempt["source"] == RENAMED and "it00000" in attempt["reason"]
    ask = generator.seen[1][1].content
    assert "had no effect: every result equals it00000's" in ask and "pressure" in ask
    assert "no effect: no effect" not in ask  # the measured effect's own prefix is not repeated
    assert "`Change:`" in ask  # by default an ask after a twin wants its edit named first
    assert child["mutation"] and child["mutation"] in ask  # the change it named is the child's
    # the new program is the child, scored by our evaluator, not a twin, summarised by the model
    assert child["source"] == BETTER_PROGRAM and child["status"] == "ok" and not child["behavioural_twin_of"]
    assert child["combined_score"] == pytest.approx(TASK.evaluate(BETTER_PROGRAM).combined_score)
    assert child["abstract"].startswith("Greedy placement")
    assert len(models["summarizer"].seen) == 2  # the initial program's abstract and the child's
    # its tokens are the Generator's two asks
    assert child["tokens"]["generator"] == {"prompt": 1600, "completion": 700}
    assert run_status(tmp_path / "r")["behavioural_twins"] == 0
    status = run_status(tmp_path / "r")
    assert status["repairs"]["attempted"] == 0  # an ask after no effect is no repair
    # ... and is timed as its own phase, its request a Generator's, neither shown as a repair
    assert "no_effect_ask" in status["seconds"] and "repair" not in status["seconds"]
    assert [(c["phase"], c["role"]) for c in child["llm_calls"] if c["role"] == "generator"] == [
        ("generate", "generator"), ("no_effect_ask", "generator")]
    assert "repair" not in status["llm"] and status["llm"]["generator"]["calls"] == 2
    assert status["llm_by_phase"]["no_effect_ask"] == {"calls": 1, "seconds": pytest.approx(
        status["llm_by_phase"]["no_effect_ask"]["seconds"]), "prompt": 700, "completion": 300}


def test_a_child_with_no_effect_twice_is_kept_as_a_behavioural_twin(tmp_path):
    generator = scripted(reply(fenced(RENAMED), 900, 400),
                         reply(fenced(INITIAL.replace("best_gpu", "chosen")), 700, 300),
                         reply(fenced(BETTER_PROGRAM), 900, 400), cycle=False)
    result, records, models = run(tmp_path, generator, iterations=2, parent_selection="best")
    first, second = records[1], records[2]
    # asked once after no effect, and the second version had none either: a valid behavioural twin
    assert first["status"] == "ok" and first["behavioural_twin_of"] == "it00000"
    assert [a["method"] for a in first["attempts"]] == ["no_effect"]
    assert first["mutation"] in generator.seen[1][1].content  # named, though its reply had no effect either
    assert first["metrics"] == records[0]["metrics"]
    assert first["outputs_digest"] == records[0]["outputs_digest"] != ""
    # no Summarizer call for it: its abstract says it had no effect and what it tried
    assert first["abstract"].startswith("NO EFFECT: the same results as it00000")
    assert "summarizer" not in first["tokens"]
    assert len(models["summarizer"].seen) == 2  # the initial program and the second child only
    # never a parent: the second child starts from the initial program although the twin ties it
    assert second["parent_id"] == "it00000"
    # the Navigator saw the twin's step as its own kind
    navigator_prompt = models["navigator"].seen[0][1].content
    assert "[no effect] it00000 -> it00001: no effect: every result equals it00000's" in navigator_prompt
    # status and the report count it
    status = run_status(tmp_path / "r")
    assert second["source"] == BETTER_PROGRAM and not second["behavioural_twin_of"]
    assert status["behavioural_twins"] == 1
    page = write_report(tmp_path / "r").read_text()
    assert 'id="behavioural-twins">' in page and "no effect: the same results as it00000" in page


def test_the_ask_after_no_effect_names_its_change_first(tmp_path):
    named = "Change: the GPU's load counts the model placed on it.\n" + fenced(BETTER_PROGRAM)
    generator = scripted(reply(fenced(RENAMED), 900, 400), reply(named, 700, 300), cycle=False)
    _, records, _ = run(tmp_path, generator)
    first, ask = (seen[1].content for seen in generator.seen)
    assert "had no effect" in ask and "`Change:`" in ask and "`Change:`" not in first
    # the named change is read past: the program after it is the child, scored by our evaluator
    assert records[1]["source"] == BETTER_PROGRAM and records[1]["status"] == "ok"


def test_behavioural_twins_off_keeps_the_paper_loop(tmp_path):
    generator = scripted(reply(fenced(RENAMED), 900, 400), reply(fenced(BETTER_PROGRAM), 700, 300),
                         cycle=False)
    _, records, models = run(tmp_path, generator, behavioural_twins=False)
    child = records[1]
    assert child["source"] == RENAMED and child["status"] == "ok" and not child["behavioural_twin_of"]
    assert not child["attempts"] and len(generator.seen) == 1 and len(models["summarizer"].seen) == 2

"""Issue 10: salvage keeps the part of a failed child's change that passes the pre-checks."""

from __future__ import annotations

import json

import pytest

from contextevolve.api import evolve
from contextevolve.graph.context import RunContext
from contextevolve.graph.state import LaneState
from contextevolve.hunks import apply_hunks, hunks, salvage
from contextevolve.llm.models import use_chat_models
from contextevolve.memory.records import ProgramRecord
from contextevolve.nodes.salvage import salvage_due
from contextevolve.tasks.registry import get_task
from tests.fakes import BETTER_PROGRAM, INITIAL, default_models, fenced, reply, scripted

TASK = get_task("model_placement")
NAME_ERROR = BETTER_PROGRAM.replace("    ordered = sorted(", "    pq.heapify([])\n    ordered = sorted(")

PARENT = "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n"


def _runs(source: str) -> bool:
    """The test's 'smoke run': the program executes without raising."""
    try:
        exec(compile(source, "candidate.py", "exec"), {})  # noqa: S102 - the tests' own strings
    except Exception:  # noqa: BLE001
        return False
    return True


def test_hunks_apply_any_subset_of_the_change():
    version = "a = 1\nb = 20\nc = 3\nd = 4\ne = 50\nf = 6\n"
    found = hunks(PARENT, version)
    assert len(found) == 2
    assert apply_hunks(PARENT, version, found, frozenset()) == PARENT
    assert apply_hunks(PARENT, version, found, frozenset({0, 1})) == version
    assert apply_hunks(PARENT, version, found, frozenset({0})) == PARENT.replace("b = 2\n", "b = 20\n")
    assert apply_hunks(PARENT, version, found, frozenset({1})) == PARENT.replace("e = 5\n", "e = 50\nf = 6\n")


def test_many_hunks_are_merged_down_to_the_cap():
    parent = "".join(f"x{i} = {i}\n" for i in range(30))
    version = "".join(f"x{i} = {i + 1 if i % 3 == 0 else i}\n" for i in range(30))
    found = hunks(parent, version, most=4)
    assert len(found) == 4
    assert apply_hunks(parent, version, found, frozenset(range(4))) == version


def test_leave_one_out_drops_the_broken_piece():
    version = "a = 1\nb = 20\nc = undefined_name\nd = 4\ne = 50\n"
    source, kept, total = salvage(PARENT, version, lambda s: True, _runs)
    assert (kept, total) == (2, 3)
    assert source == "a = 1\nb = 20\nc = 3\nd = 4\ne = 50\n"


def test_greedy_growth_keeps_every_piece_that_works_when_two_are_broken():
    version = "a = 1\nb = nope\nc = 30\nd = nope_too\ne = 50\n"
    source, kept, total = salvage(PARENT, version, lambda s: True, _runs)
    assert (kept, total) == (2, 4)
    assert _runs(source) and "c = 30" in source and "e = 50" in source and "nope" not in source


def test_a_piece_that_needs_a_later_one_gets_a_second_chance():
    # hunk 0 uses a name that only hunk 2 defines; hunk 1 is broken
    parent = "def f():\n    return 1\n\nx = 0\n\ny = 0\n\nz = 0\nf()\n"
    version = "def f():\n    return helper()\n\nx = broken\n\ny = 0\n\ndef helper():\n    return 2\nf()\n"
    source, kept, _ = salvage(parent, version, lambda s: True, _runs)
    assert source is not None and "return helper()" in source and "def helper" in source and "broken" not in source


def test_nothing_is_salvaged_from_one_hunk_or_when_every_part_fails():
    assert salvage(PARENT, PARENT.replace("b = 2", "b = nope"), lambda s: True, _runs)[0] is None
    broken = "a = 1\nb = nope\nc = 3\nd = 4\ne = nope_too\n"
    assert salvage(PARENT, broken, lambda s: True, _runs)[0] is None


def test_costly_checks_stop_at_the_budget_and_cheap_rejections_are_free():
    version = "".join(f"{v} = broken_{v}\n" for v in "abcde")
    calls = []
    source, _, _ = salvage(PARENT, version, lambda s: True, lambda s: calls.append(s) or _runs(s), budget=3)
    assert source is None and len(calls) == 3
    calls.clear()
    salvage(PARENT, version, lambda s: False, lambda s: calls.append(s) or True, budget=3)
    assert calls == []  # every candidate was refused by the cheap check


def _run(tmp_path, generator, **settings):
    models = default_models()
    models["generator"] = generator
    with use_chat_models(**models):
        evolve("model_placement", iterations=1, run_dir=tmp_path / "r", max_retries=0, **settings)
    return [json.loads(line) for line in (tmp_path / "r" / "programs.jsonl").read_text().splitlines()]


def test_a_child_still_failed_after_its_repairs_is_salvaged_and_scored(tmp_path):
    # the repairs give the error back and the restart copies the parent: no model fix
    generator = scripted(reply(fenced(NAME_ERROR), 900, 400), reply(fenced(NAME_ERROR), 1000, 400),
                         reply(fenced(INITIAL), 1100, 400), cycle=False)
    records = _run(tmp_path, generator, repair_attempts=2)
    child = records[1]
    assert len(generator.seen) == 3  # salvage asks no model
    assert child["status"] == "ok" and child["source"] == BETTER_PROGRAM  # the broken line is gone, the idea kept
    assert child["combined_score"] == pytest.approx(TASK.evaluate(BETTER_PROGRAM).combined_score)
    last = child["attempts"][-1]
    assert last["method"] == "salvage" and last["tokens"] == {} and last["source"] == NAME_ERROR
    assert "salvage kept 1 of 2 changed hunks" in last["reason"]
    assert [a["method"] for a in child["attempts"]] == ["model", "restart", "salvage"]


def test_no_salvage_when_switched_off_or_with_the_papers_algorithm(tmp_path):
    generator = scripted(reply(fenced(NAME_ERROR), 900, 400), cycle=False)
    records = _run(tmp_path, generator, repair_attempts=0)
    assert records[1]["status"] == "failed" and records[1]["attempts"] == []
    ctx = RunContext(repair_attempts=1, salvage=False)
    child = ProgramRecord(id="it00001", iteration=1, parent_id="it00000", source=NAME_ERROR, status="failed")
    assert not salvage_due(ctx, LaneState(), child, "failed", False)
    on = RunContext(repair_attempts=1)
    assert salvage_due(on, LaneState(), child, "failed", False)
    assert not salvage_due(on, LaneState(salvaged=True), child, "failed", False)  # once per child
    assert not salvage_due(on, LaneState(), child, "failed", True)  # a repair comes first
    assert not salvage_due(on, LaneState(), child, "timeout", False)
    assert not salvage_due(on, LaneState(), child.model_copy(update={"source": ""}), "failed", False)

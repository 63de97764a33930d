"""ShinkaEvolve, AdaEvolve and EvoX in `contextevolve compare`, driven by a scripted fake endpoint.

ShinkaEvolve runs in its own environment, SkyDiscover's AdaEvolve and EvoX in ours.

A peer passes only when its candidates reach our ledger, scored by our evaluator: the reply below makes one
known improvement, so every system's best must be that program's score, recomputed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from contextevolve.compare import ledger
from contextevolve.compare.runner import compare
from contextevolve.compare.schema import CompareSettings
from contextevolve.compare.shinka_peer import PYTHON_ENV, unavailable
from contextevolve.tasks.registry import get_task
from tests.fake_endpoint import FakeEndpoint

TASK = get_task("model_placement")
OLD = "kvpr = load[gpu_id] / free_mem[gpu_id]"
NEW = "kvpr = (load[gpu_id] + model.req_rate / model.slo) / max(free_mem[gpu_id] - model.model_size, 1e-9)"

needs_shinka = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))



def edit(body: dict, old: str, new: str, whole: str) -> str:
    """One scripted answer: a SEARCH/REPLACE diff where the prompt asks for one, else ``whole``.

    The diff turns ``old`` into ``new``, or back when the program shown already has ``new``, so it always
    applies; ShinkaEvolve's prompts get its ``<NAME>``/``<DIFF>``/``<CODE>`` tags around the same.
    """
    text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    shinka = "<DIFF>" in text or "<CODE>" in text
    head = "<NAME>score_after_placing</NAME>\n<DESCRIPTION>Score a GPU after placing.</DESCRIPTION>\n"
    if "<<<<<<< SEARCH" in text:
        current = re.search(r"```python\n(.*?)```", text, re.S)
        a, b = (old, new) if current is None or old in current.group(1) else (new, old)
        diff = f"<<<<<<< SEARCH\n{a}\n=======\n{b}\n>>>>>>> REPLACE\n"
        return head + f"<DIFF>\n{diff}</DIFF>\n" if shinka else diff
    program = "```python\n" + whole + "```\n"
    return head + f"<CODE>\n{program}</CODE>\n" if shinka else program


def reply(body: dict) -> str:
    """The Model Placement improvement, in whichever form the prompt asks for."""
    return edit(body, OLD, NEW, TASK.initial_program.replace(OLD, NEW))


PARADIGMS = ('```json\n[{"idea": "demand-aware greedy", "description": "count the model\'s own demand", '
             '"approach_type": "greedy"}]\n```')


def sky_reply(body: dict) -> str:
    """The answers to SkyDiscover's prompts.

    A search strategy for EvoX (its own initial one), breakthrough paradigms for AdaEvolve (JSON), and for
    both a diff on the kvpr line of the program under "# Current Program" (to :data:`NEW`, or to a copy of
    it differing by a comment, so that it always applies); the rest (EvoX's labels and summaries) gets
    :func:`reply`'s text.
    """
    import skydiscover

    system, user = str(body["messages"][0]["content"]), str(body["messages"][-1]["content"])
    if "Your rewritten search algorithm here" in user:
        strategy = Path(skydiscover.__file__).parent / "search/evox/database/initial_search_strategy.py"
        return "```python\n" + strategy.read_text() + "```"
    if "expert algorithm researcher" in system:
        return PARADIGMS
    if "<<<<<<< SEARCH" in user:
        current = user.split("# Current Program\n", 1)[-1].split("# Task", 1)[0]
        old = next((line.strip() for line in current.splitlines() if line.strip().startswith("kvpr = ")),
                   None)
        if old:
            new = NEW + "  # the same change" if old == NEW else NEW
            return f"<<<<<<< SEARCH\n{' ' * 16}{old}\n=======\n{' ' * 16}{new}\n>>>>>>> REPLACE\n"
    return reply(body)


@pytest.mark.parametrize("system", ["adaevolve", "evox", "adaevolve-full", "evox-full"])
def test_skydiscover_searches_reach_the_ledger(tmp_path, system):
    pytest.importorskip("skydiscover")
    out = tmp_path / "cmp"
    with FakeEndpoint(sky_reply) as endpoint:
        [result] = compare(CompareSettings(task="model_placement", systems=[system], candidates=3, seeds=[0],
                                           out=str(out), base_url=endpoint.url, model="fake"))
    better = TASK.evaluate(TASK.initial_program.replace(OLD, NEW)).combined_score
    assert result.best == pytest.approx(better) and result.best_recomputed == pytest.approx(better), (
        (out / f"{system}-s0" / "system.log").read_text()[-2000:])
    entries = ledger.read_ledger(out / f"{system}-s0" / "ledger.jsonl")
    assert [e.candidate for e in entries[:2]] == [False, False]  # ours and SkyDiscover's of the initial
    assert 3 <= result.candidates == sum(e.candidate for e in entries) <= 5  # EvoX: a retry is an iteration
    assert result.valid_changed == 1 and result.valid == result.candidates
    assert result.llm_calls >= 3 and result.stopped == ""
    assert (out / f"{system}-s0" / "run" / "best_program.py").read_text() != TASK.initial_program
    assert f"| {system} | 0 |" in (out / "results.md").read_text()
    # the -full variants ask for whole programs (SkyDiscover's own switch), the defaults for diffs
    asks_for_diffs = ["<<<<<<< SEARCH" in str(body["messages"][-1]["content"]) for body in endpoint.requests
                      if "# Current Program" in str(body["messages"][-1]["content"])]
    assert asks_for_diffs and set(asks_for_diffs) == {not system.endswith("-full")}
    options = json.loads((out / f"{system}-s0" / "spec.json").read_text())["options"]
    assert options == ({"diff_based_generation": False} if system.endswith("-full") else {})


@needs_shinka
def test_shinka_candidates_reach_the_ledger_and_its_seed_evaluation_is_no_candidate(tmp_path):
    out = tmp_path / "cmp"
    with FakeEndpoint(reply) as endpoint:
        [result] = compare(CompareSettings(task="model_placement", systems=["shinka"], candidates=3,
                                           seeds=[0], out=str(out), base_url=endpoint.url, model="fake"))
    better = TASK.evaluate(TASK.initial_program.replace(OLD, NEW)).combined_score
    assert result.best == pytest.approx(better) and result.best_recomputed == pytest.approx(better)
    entries = ledger.read_ledger(out / "shinka-s0" / "ledger.jsonl")
    assert [e.candidate for e in entries[:2]] == [False, False]  # ours and ShinkaEvolve's of the initial
    assert result.candidates == sum(e.candidate for e in entries) == 3 and result.valid_changed == 1
    assert result.llm_calls >= 3 and result.tokens == result.prompt_tokens + result.completion_tokens > 0
    spec = json.loads((out / "shinka-s0" / "spec.json").read_text())
    assert spec["system"] == "shinka" and spec["base_url"].endswith("/shinka-s0/v1")
    assert "| shinka | 0 |" in (out / "results.md").read_text()


@needs_shinka
def test_shinka_evolves_a_users_program_without_evolve_block_markers(tmp_path):
    from contextevolve.cli import main
    from tests.unit.test_problem import make_problem

    folder = make_problem(tmp_path / "gain")
    program = folder / "initial_program.py"
    source = "".join(line for line in program.read_text().splitlines(keepends=True)
                     if "EVOLVE-BLOCK" not in line)
    program.write_text(source)

    out = tmp_path / "cmp"
    with FakeEndpoint(lambda body: edit(body, "GAIN = 1.0", "GAIN = 3.0",
                                        source.replace("GAIN = 1.0", "GAIN = 3.0"))) as endpoint:
        code = main(["compare", "--problem", str(folder), "--systems", "shinka", "--iterations", "2",
                     "--out", str(out), "--base-url", endpoint.url, "--model", "fake"])
    assert code == 0
    [result] = json.loads((out / "results.json").read_text())["results"]
    assert result["initial"] == pytest.approx(1 / 7) and result["best"] == pytest.approx(1.0)
    entries = ledger.read_ledger(out / "shinka-s0" / "ledger.jsonl")
    assert not entries[1].candidate  # the markers it was given are not a change of the program
    evaluated = ledger.source_path(out / "shinka-s0" / "ledger.jsonl", entries[-1].source_sha256).read_text()
    assert "EVOLVE-BLOCK" not in evaluated


def test_a_missing_peer_environment_is_named_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.setenv(PYTHON_ENV, str(tmp_path / "no-such-env" / "bin" / "python"))
    with pytest.raises(ValueError, match=r"ShinkaEvolve's environment is missing .*make peers-shinka"):
        compare(CompareSettings(task="model_placement", systems=["contextevolve", "shinka"],
                                out=str(tmp_path / "cmp"), base_url="http://127.0.0.1:9/v1"))
    assert not (tmp_path / "cmp").exists()




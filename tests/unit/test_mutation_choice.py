"""Which mutation an ask after a twin names: in turn, or by what the run's own children say worked."""

from __future__ import annotations

import json
import re

import pytest

from contextevolve.api import evolve
from contextevolve.llm.models import use_chat_models
from contextevolve.program.mutations import MUTATIONS, mutation_for, mutation_odds
from tests.fakes import BETTER_PROGRAM, INITIAL, INVALID_PROGRAM, default_models, fenced, reply, scripted


def test_odds_are_laplaces_rule_per_entry():
    outcomes = [(MUTATIONS[1], True), (MUTATIONS[1], False), (MUTATIONS[2], False), ("not in the list", True)]
    odds = mutation_odds(outcomes, MUTATIONS)
    assert odds[1] == pytest.approx(2 / 4) and odds[2] == pytest.approx(1 / 3)
    assert odds[0] == odds[3] == pytest.approx(1 / 2)  # never named


def test_ties_keep_the_turn_and_the_best_odds_win():
    for iteration in range(8):
        assert mutation_for(3, iteration, MUTATIONS, (0.5,) * 6) == mutation_for(3, iteration, MUTATIONS)
    odds = (0.5, 0.5, 2 / 3, 0.5, 1 / 3, 0.5)
    assert {mutation_for(0, i, MUTATIONS, odds) for i in range(6)} == {MUTATIONS[2]}
    failed = (0.5, 0.5, 0.5, 0.5, 1 / 3, 0.5)  # the turn's own entry failed: the next in turn
    assert mutation_for(0, 4, MUTATIONS, failed) == MUTATIONS[5]
    assert mutation_for(0, 3, MUTATIONS, failed) == MUTATIONS[3]
    with pytest.raises(ValueError, match="odds"):
        mutation_for(0, 0, MUTATIONS, (0.5,))


def _named(ask: str) -> str:
    return re.search(r"computes its result: (.*?)\. ", ask).group(1)


def _run(tmp_path, **settings):
    # child 1 copies the initial program, its second ask writes a better one; child 2 (of child 1, the best)
    # copies child 1, and its second ask writes an invalid program
    generator = scripted(reply(fenced(INITIAL)), reply(fenced(BETTER_PROGRAM)),
                         reply(fenced(BETTER_PROGRAM)), reply(fenced(INVALID_PROGRAM)), cycle=False)
    models = default_models()
    models["generator"] = generator
    with use_chat_models(**models):
        evolve("model_placement", iterations=2, run_dir=tmp_path / "r", max_retries=0,
               parent_selection="best", **settings)
    records = [json.loads(line) for line in (tmp_path / "r" / "programs.jsonl").read_text().splitlines()]
    asks = [_named(seen[1].content) for seen in generator.seen
            if "Make one concrete change" in seen[1].content]
    return records, asks


def test_history_names_again_the_change_that_made_a_better_child(tmp_path):
    records, asks = _run(tmp_path / "history", mutation_choice="history")
    assert records[1]["status"] == "ok" and records[1]["combined_score"] > records[0]["combined_score"]
    assert len(asks) == 2 and records[1]["mutation"] == asks[0] and records[2]["mutation"] == asks[1]
    assert asks[1] == asks[0]  # it made a better child
    _, turn = _run(tmp_path / "turn")
    assert turn[0] == asks[0] and turn[1] != turn[0]  # in turn: the next entry, whatever worked

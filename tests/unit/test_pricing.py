"""Money: prices per model, a run's cost wherever its tokens are shown, a cost budget; and --embedded.

No price is invented: a model without one shows tokens only, and a cost budget refuses to start without
a price for every model the run calls.
"""

from __future__ import annotations

import json

import pytest

from contextevolve.api import evolve, run_status
from contextevolve.cli import main
from contextevolve.flags import parse_prices
from contextevolve.graph.context import RunContext
from contextevolve.llm.embedded import MODEL_ALIAS
from contextevolve.llm.faults import EndpointUnavailable
from contextevolve.llm.models import needs_embedded, resolve_endpoint
from contextevolve.llm.pricing import cost, dollars, unpriced_models

PRICE = {MODEL_ALIAS: {"input": 2.0, "output": 8.0}}  # the scripted runs' roles resolve to the embedded name


def test_cost_is_each_roles_tokens_at_its_models_price_and_none_without_one():
    ctx = RunContext(model="big", models={"summarizer": "small"},
                     prices={"big": {"input": 1.0, "output": 4.0}, "small": {"input": 0.1, "output": 0.2}})
    usage = {"generator": {"prompt": 1_000_000, "completion": 500_000},
             "repair": {"prompt": 1_000_000, "completion": 0},  # the Generator's model
             "summarizer": {"prompt": 2_000_000, "completion": 1_000_000}}
    assert cost(ctx, usage) == pytest.approx(1.0 + 2.0 + 1.0 + 0.2 + 0.2)
    assert unpriced_models(ctx) == []
    unpriced = RunContext(model="big", models={"summarizer": "free"},
                          prices={"big": {"input": 1, "output": 1}})
    assert cost(unpriced, usage) is None and unpriced_models(unpriced) == ["free"]
    assert cost(unpriced, {"generator": {"prompt": 10, "completion": 10}}) == pytest.approx(2e-5)
    assert cost(RunContext(), {}) is None  # no prices at all: no cost, not $0
    assert dollars(None) == "" and dollars(12.345) == "$12.35" and dollars(0.0012345) == "$0.001234"


def test_prices_are_read_from_flags_and_refused_when_malformed(tmp_path, capsys):
    assert parse_prices(["gpt-5-mini=0.25,2", "org/m=1=1,3"]) == {
        "gpt-5-mini": {"input": 0.25, "output": 2.0}, "org/m=1": {"input": 1.0, "output": 3.0}}
    for bad in ("gpt", "gpt=1", "gpt=a,b", "=1,2", "gpt=-1,2"):
        with pytest.raises(ValueError, match="--price takes MODEL=INPUT,OUTPUT"):
            parse_prices([bad])
    run_dir = tmp_path / "r"
    assert main(["run", "--price", "gpt=cheap", "--run-dir", str(run_dir)]) == 2
    assert "--price takes MODEL=INPUT,OUTPUT" in capsys.readouterr().err and not run_dir.exists()
    assert main(["run", "--cost-budget", "0.01", "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert f"none for '{MODEL_ALIAS}'" in err and "--price MODEL=INPUT,OUTPUT" in err and not run_dir.exists()
    with pytest.raises(ValueError, match="cost_budget must be > 0"):
        RunContext(cost_budget=0)
    with pytest.raises(ValueError, match="price of 'm' must be"):
        RunContext(prices={"m": {"input": 1}})


def test_a_cost_budget_stops_the_run_and_the_cost_is_shown_everywhere(tmp_path, models, capsys):
    from contextevolve.report import write_report
    from contextevolve.report.data import load_run
    from contextevolve.view.payload import search

    run_dir = tmp_path / "run"
    result = evolve("model_placement", iterations=8, run_dir=run_dir, max_retries=0,
                    prices=PRICE, cost_budget=1e-9)
    assert result.stop_reason.startswith("cost budget reached") and result.iterations < 8
    assert result.cost == pytest.approx(cost(RunContext(prices=PRICE), result.tokens)) and result.cost > 0
    assert run_status(run_dir)["cost"] == pytest.approx(result.cost)
    assert main(["status", str(run_dir)]) == 0
    assert f"cost: {dollars(result.cost)}" in capsys.readouterr().err  # (the console is stderr)
    assert json.loads((run_dir / "run.json").read_text())["llm"]["prices"] == PRICE
    data = load_run(run_dir)
    assert search(data)["total_cost"] == pytest.approx(result.cost)
    assert f'id="cost">{dollars(result.cost)}<' in write_report(run_dir).read_text()
    plain = evolve("model_placement", iterations=1, run_dir=tmp_path / "plain", max_retries=0)
    assert plain.cost is None and run_status(tmp_path / "plain")["cost"] is None  # no price: tokens only
    assert search(load_run(tmp_path / "plain"))["total_cost"] is None


def test_embedded_wins_over_a_configs_endpoint_and_the_refusal_names_it(tmp_path, monkeypatch):
    monkeypatch.setenv("CONTEXTEVOLVE_BASE_URL", "http://127.0.0.1:9/v1")
    ctx = RunContext(base_url="https://openrouter.ai/api/v1", model="some/model", embedded=True)
    assert resolve_endpoint("generator", ctx).base_url is None and needs_embedded(ctx)
    assert resolve_endpoint("generator", RunContext(model="m")).base_url == "http://127.0.0.1:9/v1"
    down = EndpointUnavailable("https://openrouter.ai/api/v1", "generator", "ConnectError", 3)
    assert "--embedded" in str(down) and "evolve(embedded=True)" in str(down)
    assert "--embedded" not in str(EndpointUnavailable(None, "generator", "crashed", 1))


def test_embedded_flag_runs_a_problem_whose_config_names_a_remote_endpoint(tmp_path, models):
    from tests.unit.test_problem import make_problem

    folder = make_problem(tmp_path / "gain", config="llm:\n  api_base: https://openrouter.ai/api/v1\n"
                                                    "  primary_model: google/gemini-2.5-flash\n"
                                                    "  prices:\n    google/gemini-2.5-flash: {input: 0.3, "
                                                    "output: 2.5}\n")
    run_dir = tmp_path / "run"
    assert main(["run", "--problem", str(folder), "--embedded", "--iterations", "1", "--run-dir",
                 str(run_dir), "--no-report"]) == 0
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["llm"]["embedded"] is True and saved["llm"]["base_url"] == "https://openrouter.ai/api/v1"
    assert saved["llm"]["prices"] == {"google/gemini-2.5-flash": {"input": 0.3, "output": 2.5}}
    ctx = RunContext.from_json(saved)
    assert resolve_endpoint("navigator", ctx) == resolve_endpoint("generator", ctx)
    assert resolve_endpoint("navigator", ctx).base_url is None  # (the scripted models stand in for it here)
    assert run_status(run_dir)["cost"] is None  # the embedded model has no price: tokens only


def test_a_spent_cost_budget_asks_no_second_time_within_the_iteration(tmp_path):
    """Like a token budget: once the iteration has spent the dollars left, a twin gets no second ask."""
    from tests.fakes import INITIAL, fenced, reply, scripted
    from tests.unit.test_repair import run

    first = cost(RunContext(prices=PRICE), {"summarizer": {"prompt": 183, "completion": 222}})
    generator = scripted(reply(fenced(INITIAL), 900, 400), reply(fenced(INITIAL), 900, 400), cycle=False)
    _, records, _ = run(tmp_path, generator, prices=PRICE, cost_budget=first * 2)  # less than one ask left
    assert len(generator.seen) == 1 and records[1]["failure_kind"] == "twin"
    generator = scripted(reply(fenced(INITIAL), 900, 400), reply(fenced(INITIAL), 900, 400), cycle=False)
    _, records, _ = run(tmp_path / "more", generator, prices=PRICE, cost_budget=1.0)
    assert len(generator.seen) == 2  # dollars left: the second ask is made

"""`contextevolve compare` driven by a scripted fake endpoint.

All three systems, the ledger, the proxy's counts against ContextEvolve's own, the result files, bad input.
"""

from __future__ import annotations

import json
import shutil

import pytest

from contextevolve.cli import main
from contextevolve.compare import ledger
from contextevolve.compare.results import ablation_rows
from contextevolve.compare.results import main as results_main
from contextevolve.compare.runner import compare
from contextevolve.compare.schema import CompareSettings, SystemResult
from contextevolve.tasks.registry import get_task
from tests.fake_endpoint import FakeEndpoint

pytest.importorskip("openevolve")
pytest.importorskip("gepa")

TASK = get_task("model_placement")
OLD = "kvpr = load[gpu_id] / free_mem[gpu_id]"
NEW = "kvpr = (load[gpu_id] + model.req_rate / model.slo) / max(free_mem[gpu_id] - model.model_size, 1e-9)"


def reply(body: dict) -> str:
    """An OpenEvolve prompt asks for SEARCH/REPLACE diffs; everything else gets the whole program."""
    if "<<<<<<< SEARCH" in json.dumps(body.get("messages", "")):
        return f"<<<<<<< SEARCH\n                {OLD}\n=======\n                {NEW}\n>>>>>>> REPLACE\n"
    return "```python\n" + TASK.initial_program.replace(OLD, NEW) + "```"


def test_compare_runs_all_three_systems_on_one_evaluator_and_counts_their_tokens(tmp_path):
    out = tmp_path / "cmp"
    with FakeEndpoint(reply) as endpoint:
        results = compare(CompareSettings(task="model_placement", candidates=2, seeds=[0], out=str(out),
                                          systems=["contextevolve", "openevolve", "openevolve-full", "gepa",
                                                   "contextevolve-no-navigator"],
                                          base_url=endpoint.url, model="fake", log_prompts=True))
    initial = TASK.evaluate(TASK.initial_program).combined_score
    better = TASK.evaluate(TASK.initial_program.replace(OLD, NEW)).combined_score
    assert better > initial
    by_system = {r.system: r for r in results}
    assert set(by_system) == {"contextevolve", "openevolve", "openevolve-full", "gepa",
                              "contextevolve-no-navigator"}
    for result in results:
        assert result.initial == pytest.approx(initial)
        assert result.best == pytest.approx(better) and result.best_recomputed == pytest.approx(better)
        assert result.valid_changed == 1  # the same change, every later copy of it is no change
        assert result.llm_calls > 0 and result.tokens == result.prompt_tokens + result.completion_tokens > 0
        entries = ledger.read_ledger(out / result.label / "ledger.jsonl")
        assert entries[0].index == 0 and not entries[0].candidate
        assert result.candidates == sum(e.candidate for e in entries) >= 1
        assert len(result.best_so_far) == len(result.cumulative_tokens) == result.candidates
        assert result.cumulative_tokens == sorted(result.cumulative_tokens)
        assert 0 < result.cumulative_tokens[0] and result.cumulative_tokens[-1] <= result.tokens
        # and the prompt tokens among them, candidate by candidate (what each had cost by then)
        assert len(result.cumulative_prompt_tokens) == result.candidates
        assert all(0 < p < t for p, t in zip(result.cumulative_prompt_tokens, result.cumulative_tokens))
        assert result.cumulative_prompt_tokens[-1] <= result.prompt_tokens
    # the proxy's count equals ContextEvolve's own report
    for name in ("contextevolve", "contextevolve-no-navigator"):
        assert by_system[name].tokens == by_system[name].own_tokens
        # its second child wrote the first one out again (a code twin): never evaluated, not a candidate
        assert by_system[name].candidates == 1 and by_system[name].stopped == ""
        assert by_system[name].cumulative_tokens[0] < by_system[name].tokens
        statuses = [json.loads(line)["failure_kind"] for line in
                    (out / f"{name}-s0" / "run" / "programs.jsonl").read_text().splitlines()]
        assert statuses == ["", "", "twin"]
    assert by_system["openevolve"].candidates == by_system["openevolve-full"].candidates == 2
    assert json.loads((out / "openevolve-full-s0" / "spec.json").read_text())["options"] == {
        "diff_based_evolution": False}
    assert not any(body.get("stream") for body in endpoint.requests)
    # ContextEvolve's prompts are kept for replays, each request once (no retries here); the peers' are not
    kept = [json.loads(line)
            for line in (out / "contextevolve-s0" / "run" / "prompts.jsonl").read_text().splitlines()]
    assert (len(kept) == by_system["contextevolve"].llm_calls
            and {"generator", "summarizer"} <= {r["role"] for r in kept})
    assert not list(out.glob("openevolve*/**/prompts.jsonl")) and not list(out.glob("gepa*/**/prompts.jsonl"))
    saved = json.loads((out / "results.json").read_text())
    assert ([r["label"] for r in saved["results"]] == [r.label for r in results]
            and "api_key" not in saved["settings"])
    table = (out / "results.md").read_text()
    assert "| openevolve | 0 |" in table and "Medians over seeds" in table
    for png in ("best_so_far.png", "tokens.png", "ablations.png"):
        assert (out / png).stat().st_size > 1000
    (out / "results.md").unlink()
    assert results_main([str(out)]) == 0 and (out / "results.md").read_text() == table
    assert results_main([str(tmp_path / "nothing")]) == 2
    requests = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    assert {r["label"] for r in requests} == {r.label for r in results}
    for result in results:  # within a run, no two requests carry the same seed
        seeds = [r["seed"] for r in requests if r["label"] == result.label]
        assert len(seeds) == len(set(seeds)) == result.llm_calls


def test_ledger_counts_copies_as_unchanged_and_the_peers_seed_evaluation_as_no_candidate(tmp_path):
    path = tmp_path / "ledger.jsonl"
    ledger.evaluate(TASK, TASK.initial_program, path, initial=True)
    ledger.evaluate(TASK, TASK.initial_program, path)  # a peer scoring its seed program
    ledger.evaluate(TASK, TASK.initial_program + "\n# only a comment\n", path)  # a copy
    ledger.evaluate(TASK, TASK.initial_program.replace(OLD, NEW), path)
    ledger.evaluate(TASK, "def compute_model_placement(:\n", path)
    entries = ledger.read_ledger(path)
    assert [(e.candidate, e.changed, e.status) for e in entries] == [
        (False, False, "ok"), (False, False, "ok"), (True, False, "ok"), (True, True, "ok"),
        (True, False, "failed")]
    figures = ledger.summary(entries, TASK)
    assert (figures["candidates"], figures["valid"], figures["valid_changed"]) == (3, 2, 1)
    assert figures["best_so_far"][0] == figures["initial"] < figures["best_so_far"][1] == figures["best"]
    best = ledger.best_entry(entries, TASK)
    assert ledger.source_path(path, best.source_sha256).read_text() == TASK.initial_program.replace(OLD, NEW)


def test_a_valid_candidate_counts_as_a_new_score_only_when_no_earlier_valid_program_scored_the_same(
        tmp_path):
    path = tmp_path / "ledger.jsonl"
    changed = TASK.initial_program.replace(OLD, NEW)
    ledger.evaluate(TASK, TASK.initial_program, path, initial=True)
    ledger.evaluate(TASK, TASK.initial_program + "\n_unused = 1\n", path)  # new code, the initial's score
    ledger.evaluate(TASK, changed, path)  # a new score
    ledger.evaluate(TASK, changed + "\n_unused = 2\n", path)  # new code, a score already seen
    ledger.evaluate(TASK, "def compute_model_placement(:\n", path)  # invalid
    figures = ledger.summary(ledger.read_ledger(path), TASK)
    assert (figures["valid"], figures["valid_changed"], figures["valid_new_score"]) == (3, 3, 1)
    # results written before the count existed get it from the kept ledger when the table is rewritten
    out = tmp_path / "cmp"
    (out / "gepa-s0").mkdir(parents=True)
    path.rename(out / "gepa-s0" / "ledger.jsonl")
    (out / "results.json").write_text(json.dumps({
        "settings": CompareSettings(task="model_placement", out=str(out), systems=["gepa"]).model_dump(),
        "results": [{"system": "gepa", "seed": 0, "label": "gepa-s0", "valid": 3, "tokens": 20_000}]}))
    assert results_main([str(out)]) == 0
    saved = json.loads((out / "results.json").read_text())
    assert saved["results"][0]["valid_new_score"] == 1
    assert "| gepa | 1 | – | – | 38% | 0 | 0.50 |" in (out / "results.md").read_text()


def test_a_score_within_the_tasks_tolerance_of_an_earlier_one_is_not_new(monkeypatch):
    """A task whose score has a timing term: a copy that ran a little faster does not count as new."""
    monkeypatch.setattr(TASK, "score_tolerance", 0.01)

    def entry(index: int, score: float, status: str = "ok") -> ledger.LedgerEntry:
        return ledger.LedgerEntry(index=index, candidate=index > 0, status=status, combined_score=score,
                                  source_sha256=str(index))

    entries = [entry(0, 1.0), entry(1, 1.005), entry(2, 1.02), entry(3, 1.025), entry(4, 0.5, "failed"),
               entry(5, 0.9)]
    assert ledger.summary(entries, TASK)["valid_new_score"] == 2  # 1.02 and 0.9


def test_compare_refuses_bad_input_before_running_anything(tmp_path, capsys):
    assert main(["compare", "--task", "model_placement", "--systems", "contextevolve,alphaevolve",
                 "--out", str(tmp_path / "a"), "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "unknown system 'alphaevolve'" in "".join(capsys.readouterr())
    assert main(["compare", "--task", "no_such_task", "--out", str(tmp_path / "b")]) == 2
    assert "no_such_task" in "".join(capsys.readouterr())
    (tmp_path / "c" / "gepa-s0").mkdir(parents=True)
    assert main(["compare", "--task", "model_placement", "--systems", "gepa", "--out", str(tmp_path / "c"),
                 "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "already holds results for gepa-s0" in "".join(capsys.readouterr())
    with pytest.raises(SystemExit) as stop:  # argparse's own error
        main(["compare", "--task", "model_placement", "--seeds", "0,x", "--out", str(tmp_path / "d")])
    assert stop.value.code == 2 and "not a comma-separated list of int: '0,x'" in "".join(capsys.readouterr())
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_peer_is_stopped_at_the_token_budget_and_a_comparison_can_be_extended(tmp_path, monkeypatch):
    def slow(body: dict) -> str:
        import time
        time.sleep(1.0)  # long enough for the watchdog to see the first request's tokens
        return reply(body)

    monkeypatch.chdir(tmp_path)  # a relative --out, as a user types it
    with FakeEndpoint(slow) as endpoint:
        [result] = compare(CompareSettings(task="model_placement", systems=["gepa"], candidates=6, seeds=[1],
                                           out="cmp", base_url=endpoint.url, model="fake", token_budget=1))
        assert result.stopped == "token budget 1 reached"
        assert 1 <= result.llm_calls < 6 and result.tokens >= 1
        assert result.initial is not None and result.best is not None  # the ledger survived the stop
        results = compare(CompareSettings(task="model_placement", systems=["openevolve"], candidates=1,
                                          seeds=[1], out="cmp", base_url=endpoint.url, model="fake"))
    assert [r.label for r in results] == ["gepa-s1", "openevolve-s1"] and results[1].candidates == 1
    saved = json.loads((tmp_path / "cmp" / "results.json").read_text())
    assert [r["label"] for r in saved["results"]] == ["gepa-s1", "openevolve-s1"]
    assert saved["settings"]["systems"] == ["gepa", "openevolve"]
    with pytest.raises(ValueError, match="comparison on 'model_placement', not 'txn_scheduling'"):
        compare(CompareSettings(task="txn_scheduling", systems=["gepa"], out="cmp", base_url=endpoint.url))


def test_contextevolve_leaves_the_shared_embedded_server_running_for_the_next_system(tmp_path, monkeypatch):
    """Regression: ``evolve`` stopped the process-wide embedded server even when given another endpoint.

    It was given the proxy, so every system after ContextEvolve met a dead upstream.
    """
    from contextevolve.compare import runner
    from contextevolve.llm import embedded

    class Shared:  # stands in for the embedded server that compare started
        stopped = False

        def running(self) -> bool:
            return not self.stopped

        def stop(self) -> None:
            self.stopped = True

    shared = Shared()
    monkeypatch.setitem(embedded._servers, embedded.SHARED, shared)
    with FakeEndpoint(reply) as endpoint:
        monkeypatch.setattr(runner, "_embedded_endpoint", lambda: (endpoint.url, "fake"))
        results = compare(CompareSettings(task="model_placement", systems=["contextevolve", "gepa"],
                                          candidates=1, seeds=[0], out=str(tmp_path / "cmp")))
    assert not shared.stopped
    assert [r.stopped for r in results] == ["", ""]
    assert [r.candidates for r in results] == [1, 1] and results[1].valid == 1


def test_a_run_whose_requests_failed_says_so(tmp_path):
    def broken(body: dict) -> str:
        raise RuntimeError("the model is down")  # the endpoint answers HTTP 500

    with FakeEndpoint(broken) as endpoint:
        [result] = compare(CompareSettings(task="model_placement", systems=["openevolve"], candidates=1,
                                           seeds=[0], out=str(tmp_path / "cmp"), base_url=endpoint.url,
                                           model="fake"))
    assert "endpoint errors: " in result.stopped and "(HTTP 500)" in result.stopped
    assert result.candidates == 0 and result.tokens == 0 and result.llm_calls >= 1


def test_ablations_are_compared_with_the_full_system_on_the_seeds_both_ran():
    from contextevolve.compare.results import ablation_rows, markdown
    from contextevolve.compare.schema import SystemResult

    def run(system: str, seed: int, best: float) -> SystemResult:
        return SystemResult(system=system, seed=seed, label=f"{system}-s{seed}", initial=20.0, best=best)

    results = [run("contextevolve", 0, 20.0), run("contextevolve", 1, 30.0),
               run("contextevolve-no-sampler", 0, 22.0), run("contextevolve-no-navigator", 2, 25.0)]
    [row] = ablation_rows(results, TASK)  # no-navigator shares no seed with the full system
    assert row["system"] == "contextevolve-no-sampler" and row["seeds"] == [0]
    assert row["full_best"] == 20.0 and row["relative"] == pytest.approx(1.1)  # not against seed 1's 30.0
    assert "| contextevolve-no-sampler | 0 | 22 | 20 | 1.1000 |" in markdown(results, TASK)
    lower = get_task("sparse_attention")  # lower is better: the ratio is turned round
    assert not lower.higher_is_better
    [row] = ablation_rows([run("contextevolve", 0, 0.1), run("contextevolve-no-sampler", 0, 0.2)], lower)
    assert row["relative"] == pytest.approx(0.5)


def test_a_peer_is_stopped_at_the_time_budget(tmp_path):
    def slow(body: dict) -> str:
        import time
        time.sleep(1.0)
        return reply(body)

    with FakeEndpoint(slow) as endpoint:
        [result] = compare(CompareSettings(task="model_placement", systems=["gepa"], candidates=50, seeds=[0],
                                           out=str(tmp_path / "cmp"), base_url=endpoint.url, model="fake",
                                           time_budget_s=6))
    assert result.stopped == "time budget 0.1 min reached"
    assert result.llm_calls < 50 and result.initial is not None  # stopped early, the ledger kept


def test_compare_on_a_problem_folder_scores_every_system_with_the_users_evaluator(tmp_path, capsys):
    from contextevolve.cli import main
    from tests.unit.test_problem import PROGRAM, make_problem

    folder = make_problem(tmp_path / "gain")
    better = PROGRAM.replace("GAIN = 1.0", "GAIN = 3.0")

    def answer(body: dict) -> str:
        if "<<<<<<< SEARCH" in json.dumps(body.get("messages", "")):
            return "<<<<<<< SEARCH\nGAIN = 1.0\n=======\nGAIN = 3.0\n>>>>>>> REPLACE\n"
        return "```python\n" + better + "```"

    out = tmp_path / "cmp"
    with FakeEndpoint(answer) as endpoint:
        code = main(["compare", "--problem", str(folder), "--systems",
                     "contextevolve,openevolve,gepa,adaevolve", "--iterations", "1", "--out", str(out),
                     "--base-url", endpoint.url, "--model", "fake"])
    assert code == 0
    saved = json.loads((out / "results.json").read_text())
    assert saved["settings"]["task"] == f"problem:{(out / 'problem').resolve()}"
    for result in saved["results"]:  # solve(3) = 3 scores 1/7; GAIN = 3 makes it 9: 1.0
        assert result["initial"] == pytest.approx(1 / 7) and result["best"] == pytest.approx(1.0), (
            result["label"])
        assert result["best_recomputed"] == pytest.approx(1.0)

    # The folder's results.json copied elsewhere still extends, its first staging gone: the problem is
    # known by its digest.
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "results.json").write_text((out / "results.json").read_text())
    shutil.rmtree(out)
    with FakeEndpoint(answer) as endpoint:
        args = ["--iterations", "1", "--seeds", "1", "--base-url", endpoint.url, "--model", "fake"]
        assert main(["compare", "--problem", str(folder), "--systems", "openevolve", "--out", str(copy),
                     *args]) == 0
        extended = json.loads((copy / "results.json").read_text())
        assert [r["label"] for r in extended["results"]][-1] == "openevolve-s1"
        assert len(extended["results"]) == 5 and extended["settings"]["problem_digest"]
        # Another version of the problem's files is refused, and nothing already written is touched.
        other = make_problem(tmp_path / "other", program=PROGRAM.replace("GAIN = 1.0", "GAIN = 2.0"))
        fresh = tmp_path / "fresh"
        fresh.mkdir()
        (fresh / "results.json").write_text((copy / "results.json").read_text())
        refused = ["compare", "--problem", str(other), "--systems", "gepa", "--out", str(fresh), *args]
        assert main(refused) == 2
    assert "another version of its files" in capsys.readouterr().err
    assert json.loads((fresh / "results.json").read_text()) == extended and not (fresh / "gepa-s1").exists()
    # A whole folder moved elsewhere: its table is rewritten with its own staged copy of the problem.
    moved = tmp_path / "moved"
    shutil.copytree(copy, moved)
    shutil.rmtree(copy)
    assert results_main([str(moved)]) == 0
    rewritten = json.loads((moved / "results.json").read_text())
    assert rewritten["settings"]["task"] == f"problem:{(moved / 'problem').resolve()}"
    assert [r["best"] for r in rewritten["results"]] == [r["best"] for r in extended["results"]]


def test_every_run_is_also_cut_at_the_same_tokens():
    from contextevolve.compare.results import best_within, markdown
    from contextevolve.compare.schema import SystemResult

    # ContextEvolve checks its budget between iterations, so its last child can end past it:
    # its 24.0 came after 41,000 tokens and must not count against a 40,000-token budget.
    ours = SystemResult(system="contextevolve", seed=0, label="contextevolve-s0", initial=20.0, best=24.0,
                        tokens=47_000, best_so_far=[20.0, 22.0, 24.0],
                        cumulative_tokens=[9_000, 30_000, 47_000])
    peer = SystemResult(system="gepa", seed=0, label="gepa-s0", initial=20.0, best=21.0, tokens=40_100,
                        best_so_far=[21.0, 21.0], cumulative_tokens=[20_000, 40_100])
    late = SystemResult(system="openevolve", seed=0, label="openevolve-s0", initial=20.0, best=23.0,
                        tokens=41_000, best_so_far=[23.0], cumulative_tokens=[41_000])
    broken = SystemResult(system="openevolve-full", seed=0, label="openevolve-full-s0", initial=20.0,
                          best=20.0, best_so_far=[20.0, 20.0], cumulative_tokens=[5_000])
    assert best_within(ours, 40_000) == (22.0, 2)
    assert best_within(peer, 40_000) == (21.0, 1)
    assert best_within(late, 40_000) == (20.0, 0)  # nothing finished within: the initial program
    assert best_within(broken, 40_000) == (None, None)  # records that do not line up are not guessed at
    settings = CompareSettings(task="model_placement", out="unused", candidates=8, token_budget=40_000)
    table = markdown([ours, peer, late, broken], TASK, settings)
    assert table.startswith("Budget per system and seed, whichever is reached first: 8 candidates, "
                            "40,000 tokens, no time budget.")
    assert "Best within the same 40,000 tokens" in table
    # ranked by best over the whole run, then by best within the budget (24 > 23 > 21, 20; 22 > 21 > 20)
    assert "| contextevolve | 0 | 20 | 24 | 1 |" in table and "| openevolve | 0 | 20 | 23 | 2 |" in table
    assert "| gepa | 0 | 20 | 21 | 3 |" in table and "| openevolve-full | 0 | 20 | 20 | 4 |" in table
    assert "| contextevolve | 0 | 22 | 1 | 2 | 47,000 |" in table
    assert "| openevolve | 0 | 20 | 3 | 0 | 41,000 |" in table
    assert "| openevolve-full | 0 | – | – | – | 0 |" in table
    assert "Best within" not in markdown([ours], TASK)  # a candidate budget only: no cut table


def test_contextevolve_ledger_holds_every_version_its_evaluator_ran_and_no_code_twin():
    from contextevolve.compare.own_run import evaluated_versions

    base = TASK.initial_program
    better = base.replace(OLD, NEW)
    tokens = {"generator": {"prompt": 900, "completion": 100}}
    repair = {"repair": {"prompt": 150, "completion": 50}}
    code_twin = {"source": base, "status": "failed", "failure_kind": "twin", "combined_score": -1.0}
    no_reply = {"source": "", "status": "failed", "failure_kind": "endpoint", "combined_score": -1.0}
    bad_edit = {"source": "def f(:", "status": "failed", "failure_kind": "edit", "combined_score": -1.0}
    pending = {"source": better, "status": "pending", "failure_kind": "", "combined_score": -1.0}
    assert [evaluated_versions(row, 5_000) for row in (code_twin, no_reply, bad_edit, pending)] == [[]] * 4
    # a NameError fixed by an added import (no request), then a model repair: three versions ran
    fixed = {"source": better, "status": "ok", "failure_kind": "", "combined_score": 22.5,
             "eval_seconds": 1.5, "tokens": tokens, "attempts": [
                 {"attempt": 1, "method": "import", "status": "failed", "failure_kind": "runtime",
                  "reason": "NameError: heapq", "source": "v1"},
                 {"attempt": 2, "method": "model", "status": "invalid", "failure_kind": "invalid",
                  "reason": "bad placement", "source": "v2", "tokens": repair}]}
    versions = evaluated_versions(fixed, 5_000)
    assert [(v.source, v.status, v.score) for v in versions] == [
        ("v1", "failed", None), ("v2", "invalid", None), (better, "ok", 22.5)]
    assert [v.tokens_used for v in versions] == [4_800, 4_800, 5_000]  # before the repair's 200 tokens
    # a behavioural twin asked again: replaced (two versions ran) or kept (one version, not two)
    replaced = {"source": better, "status": "ok", "failure_kind": "", "combined_score": 22.5,
                "attempts": [{"attempt": 1, "method": "no_effect", "status": "ok", "reason": "no effect",
                              "source": "twin version"}]}
    kept = {"source": "twin version", "status": "ok", "failure_kind": "", "combined_score": 21.9,
            "attempts": [{"attempt": 1, "method": "no_effect", "status": "ok", "reason": "no effect",
                          "source": "twin version"}]}
    assert [(v.source, v.score) for v in evaluated_versions(replaced, 10)] == [("twin version", None),
                                                                              (better, 22.5)]
    assert [(v.source, v.score) for v in evaluated_versions(kept, 10)] == [("twin version", 21.9)]
    # a repair whose reply was unusable keeps the evaluated version (relabelled endpoint, or edit by the
    # next repair): it still counts once, with the evaluator's verdict
    unusable = {"source": "v1", "status": "failed", "failure_kind": "endpoint", "combined_score": -1.0,
                "attempts": [{"attempt": 1, "status": "failed", "failure_kind": "runtime", "reason": "boom",
                              "source": "v1", "tokens": repair}]}
    assert [(v.source, v.status, v.reason, v.score, v.tokens_used)
            for v in evaluated_versions(unusable, 1_000)] == [("v1", "failed", "boom", None, 800)]
    failing = {"status": "failed", "source": "v1", "tokens": repair}
    again = {**fixed, "attempts": [{**failing, "attempt": 1, "failure_kind": "runtime", "reason": "boom"},
                                   {**failing, "attempt": 2, "failure_kind": "edit", "reason": "no code"}]}
    assert [(v.source, v.status, v.tokens_used) for v in evaluated_versions(again, 5_000)] == [
        ("v1", "failed", 4_600), (better, "ok", 5_000)]


def test_every_run_is_also_cut_at_the_same_dollars():
    from contextevolve.compare.results import best_within_cost, markdown
    from contextevolve.compare.schema import SystemResult
    from contextevolve.graph.settings import Price

    price = Price(input=1.0, output=4.0)  # dollars per million tokens
    # candidate 2 cost 20,000 * 1 + 10,000 * 4 = $0.06 by its end, candidate 3 $0.12
    ours = SystemResult(system="contextevolve", seed=0, label="contextevolve-s0", initial=20.0, best=24.0,
                        tokens=60_000, cost=0.12, best_so_far=[20.0, 22.0, 24.0],
                        cumulative_tokens=[3_000, 30_000, 60_000],
                        cumulative_prompt_tokens=[2_000, 20_000, 40_000])
    # fewer tokens but most of them completion: its second candidate is past $0.08 (10,000 + 4 * 20,000)
    peer = SystemResult(system="gepa", seed=0, label="gepa-s0", initial=20.0, best=23.0, tokens=30_000,
                        cost=0.09, best_so_far=[21.0, 23.0], cumulative_tokens=[5_000, 30_000],
                        cumulative_prompt_tokens=[4_000, 10_000])
    old = SystemResult(system="openevolve", seed=0, label="openevolve-s0", initial=20.0, best=21.0,
                       tokens=1_000, best_so_far=[21.0], cumulative_tokens=[1_000])  # prompt tokens not kept
    assert best_within_cost(ours, 0.08, price) == (22.0, 2)
    assert best_within_cost(peer, 0.08, price) == (21.0, 1)
    assert best_within_cost(peer, 0.001, price) == (20.0, 0)  # nothing finished within: the initial program
    assert best_within_cost(old, 0.08, price) == (None, None)
    settings = CompareSettings(task="model_placement", out="unused", candidates=8, cost_budget=0.08,
                               base_url="http://127.0.0.1:9/v1", model="m",
                               prices={"m": {"input": 1.0, "output": 4.0}})
    table = markdown([ours, peer, old], TASK, settings)
    assert "Best within the same $0.08 (candidates finished by then, at the given prices):" in table
    assert "| contextevolve | 0 | 22 | 1 | 2 | $0.12 |" in table
    assert "| gepa | 0 | 21 | 2 | 1 | $0.09 |" in table
    assert "| openevolve | 0 | – | – | – | – |" in table
    unpriced = settings.model_copy(update={"prices": {}})
    assert "Best within the same $" not in markdown([ours, peer], TASK, unpriced)  # no price: no cut


def test_every_system_is_stopped_at_the_same_cost_and_a_budget_without_a_price_is_refused(tmp_path, capsys):
    def slow(body: dict) -> str:
        import time
        time.sleep(1.0)  # long enough for the watchdog to see the first request's cost
        return reply(body)

    price = {"fake": {"input": 10.0, "output": 40.0}}  # dollars per million tokens
    with FakeEndpoint(slow) as endpoint:
        results = compare(CompareSettings(task="model_placement", systems=["gepa", "contextevolve"],
                                          candidates=8, seeds=[0], out=str(tmp_path / "cmp"),
                                          base_url=endpoint.url, model="fake", prices=price,
                                          cost_budget=0.01))
        by_system = {r.system: r for r in results}
        assert by_system["gepa"].stopped == "cost budget $0.01 reached"
        assert by_system["contextevolve"].stopped.startswith("cost budget reached")
        for result in results:  # stopped well before the 8 candidates, the cost recomputed from the proxy
            assert result.cost >= 0.01 and result.llm_calls < 20 and result.initial is not None
            spent = (10 * result.prompt_tokens + 40 * result.completion_tokens) / 1e6
            assert result.cost == pytest.approx(spent)
        written = (tmp_path / "cmp" / "results.md").read_text()
        assert "$0.01 (at the given prices)" in written and "Best within the same $0.01" in written
        # no price for the model: refused before anything runs or is written
        code = main(["compare", "--task", "model_placement", "--systems", "gepa",
                     "--out", str(tmp_path / "x"), "--base-url", endpoint.url, "--model", "other",
                     "--price", "fake=10,40", "--cost-budget", "0.01"])
    printed = capsys.readouterr().err.replace("\n", " ")
    assert code == 2 and "the price of the model every system calls: none for 'other'" in printed
    assert not (tmp_path / "x").exists()
    with pytest.raises(ValueError, match="--cost-budget must be above 0"):
        compare(CompareSettings(task="model_placement", systems=["gepa"], out=str(tmp_path / "y"),
                                base_url="http://127.0.0.1:9/v1", model="fake", prices=price, cost_budget=0))


def test_every_contextevolve_role_calls_the_comparisons_model_whatever_the_environment_says(
        tmp_path, monkeypatch):
    """A role model set in the environment must not give ContextEvolve another model than the peers'."""
    monkeypatch.setenv("CONTEXTEVOLVE_NAVIGATOR_MODEL", "stronger")
    monkeypatch.setenv("CONTEXTEVOLVE_GENERATOR_MODEL", "stronger")
    with FakeEndpoint(reply) as endpoint:
        [result] = compare(CompareSettings(task="model_placement", systems=["contextevolve"], candidates=2,
                                           out=str(tmp_path / "cmp"), base_url=endpoint.url, model="fake"))
    assert result.llm_calls >= 2 and result.candidates >= 1
    assert {r.get("model") for r in endpoint.requests} == {"fake"}



def test_contextevolve_args_reach_every_contextevolve_run_and_its_rows(tmp_path, capsys):
    """``--contextevolve-args`` sets run settings of every ContextEvolve system, ablations included."""
    out = tmp_path / "cmp"
    with FakeEndpoint(reply) as endpoint:
        assert main(["compare", "--task", "model_placement", "--iterations", "2", "--out", str(out),
                     "--systems", "contextevolve,contextevolve-no-navigator", "--base-url", endpoint.url,
                     "--model", "fake", "--contextevolve-args",
                     "--parent-selection tournament --stale-after 3 --disable sampler"]) == 0
    for label, navigator in (("contextevolve-s0", True), ("contextevolve-no-navigator-s0", False)):
        saved = json.loads((out / label / "run" / "run.json").read_text())
        assert saved["search"]["parent_selection"] == "tournament" and saved["search"]["stale_after"] == 3
        assert saved["ablations"]["sampler_enabled"] is False
        assert saved["ablations"]["navigator_enabled"] is navigator  # the ablation's own switch still holds
        assert saved["seed"] == 0 and saved["max_iterations"] == 2  # the comparison's own settings
    rows = json.loads((out / "results.json").read_text())
    assert rows["settings"]["contextevolve_settings"] == {"parent_selection": "tournament", "stale_after": 3,
                                                          "sampler_enabled": False}
    assert all(r["settings"]["parent_selection"] == "tournament" for r in rows["results"])
    table = (out / "results.md").read_text()
    assert ('contextevolve-s0, contextevolve-no-navigator-s0: parent_selection="tournament", '
            "sampler_enabled=false, stale_after=3." in table)
    # rerun one system against the stored rows: its row is replaced, the other's stays with its settings
    again = tmp_path / "again"
    again.mkdir()
    (again / "results.json").write_text((out / "results.json").read_text())
    with FakeEndpoint(reply) as endpoint:
        assert main(["compare", "--task", "model_placement", "--iterations", "2", "--out", str(again),
                     "--systems", "contextevolve", "--base-url", endpoint.url, "--model", "fake"]) == 0
    rows = {r["label"]: r for r in json.loads((again / "results.json").read_text())["results"]}
    assert set(rows) == {"contextevolve-s0", "contextevolve-no-navigator-s0"}
    assert rows["contextevolve-s0"]["settings"] == {} and rows["contextevolve-no-navigator-s0"]["settings"]
    assert ("(`compare --contextevolve-args`): contextevolve-no-navigator-s0: parent_selection="
            in (again / "results.md").read_text())
    assert json.loads((again / "contextevolve-s0" / "run" / "run.json").read_text())["search"][
        "parent_selection"] == "pareto"


def test_a_variant_runs_beside_the_default_rows_in_one_folder_and_table(tmp_path, capsys):
    """``--variant`` names the ContextEvolve rows of other settings: a before/after pair shares a table."""
    out = tmp_path / "cmp"
    base = ["compare", "--task", "model_placement", "--iterations", "2", "--out", str(out), "--model", "fake"]
    with FakeEndpoint(reply) as endpoint:
        assert main([*base, "--systems", "contextevolve", "--base-url", endpoint.url]) == 0
        assert main([*base, "--systems", "contextevolve,contextevolve-no-sampler", "--base-url", endpoint.url,
                     "--variant", "tournament", "--contextevolve-args=--parent-selection tournament"]) == 0
    rows = {r["label"]: r for r in json.loads((out / "results.json").read_text())["results"]}
    assert set(rows) == {"contextevolve-s0", "contextevolve+tournament-s0",
                         "contextevolve-no-sampler+tournament-s0"}
    assert rows["contextevolve+tournament-s0"]["system"] == "contextevolve+tournament"
    assert rows["contextevolve-s0"]["settings"] == {}
    assert rows["contextevolve+tournament-s0"]["settings"] == {"parent_selection": "tournament"}
    for label, selection in (("contextevolve-s0", "pareto"), ("contextevolve+tournament-s0", "tournament")):
        saved = json.loads((out / label / "run" / "run.json").read_text())
        assert saved["search"]["parent_selection"] == selection and saved["seed"] == 0
    saved = json.loads((out / "contextevolve-no-sampler+tournament-s0" / "run" / "run.json").read_text())
    assert saved["ablations"]["sampler_enabled"] is False
    table = (out / "results.md").read_text()
    assert "| contextevolve+tournament | 0 |" in table and "| contextevolve | 0 |" in table
    assert "| contextevolve+tournament | 1 |" in table  # its own line among the medians per system
    assert all(row["llm_calls"] >= 2 for row in rows.values())  # the proxy counted each label's requests
    stored = [SystemResult.model_validate(r) for r in rows.values()]
    stored = [r.model_copy(update={"best": 99.0}) if r.label == "contextevolve-s0" else r for r in stored]
    [ablation] = ablation_rows(stored, get_task("model_placement"))  # against its variant, not the default
    assert ablation["system"] == "contextevolve-no-sampler+tournament"
    assert ablation["full_best"] == rows["contextevolve+tournament-s0"]["best"] != 99.0
    # the same variant again, a bad name, or a variant without ContextEvolve: refused before anything runs
    for variant, systems, message in (("tournament", "contextevolve", "already holds results for contextev"),
                                      ("a-b", "contextevolve", "a variant's name is letters"),
                                      ("x", "gepa", "--systems holds no ContextEvolve system")):
        assert main([*base, "--systems", systems, "--base-url", "http://127.0.0.1:9/v1",
                     "--variant", variant]) == 2
        assert message in "".join(capsys.readouterr())


def test_contextevolve_args_the_comparison_sets_itself_or_cannot_parse_are_refused(tmp_path, capsys):
    base = ["compare", "--task", "model_placement", "--systems", "contextevolve", "--base-url",
            "http://127.0.0.1:9/v1"]
    cases = {"--seed 3": "seed (set by --seeds)", "--token-budget 5": "token_budget (set by --token-budget)",
             "--eval-cpu 5": "eval_cpu_s (every system's candidates are evaluated alike)",
             "--parent-selection best-of": "argument --parent-selection: invalid choice",
             "--stale-aftr 2": "unrecognized arguments: --stale-aftr 2",
             "--mutation ''": "mutations must name at least one change"}
    for number, (flags, message) in enumerate(cases.items()):
        out = tmp_path / f"o{number}"
        assert main([*base, "--out", str(out), f"--contextevolve-args={flags}"]) == 2
        assert message in "".join(capsys.readouterr()), flags
        assert not out.exists()
    with pytest.raises(ValueError, match="not as a group: search"):
        compare(CompareSettings(task="model_placement", systems=["contextevolve"], out=str(tmp_path / "g"),
                                contextevolve_settings={"search": {"stale_after": 1}}))
    assert not (tmp_path / "g").exists()
    with pytest.raises(ValueError, match="ContextEvolve settings of the comparison: invalid run settings: "
                                         "stale_after: input should be a valid integer.*not 'three'"):
        compare(CompareSettings(task="model_placement", systems=["contextevolve"], out=str(tmp_path / "t"),
                                contextevolve_settings={"stale_after": "three"}))
    assert not (tmp_path / "t").exists()

"""Every node, called directly on a real run directory with scripted fake chat models."""

from __future__ import annotations

from dataclasses import replace

import pytest
from langgraph.graph import END

from contextevolve.llm.calls import estimate_tokens
from contextevolve.llm.models import use_chat_models
from contextevolve.loop.composing import prompt_of
from contextevolve.loop.policy import SearchPolicy
from contextevolve.loop.resources import rng_for
from contextevolve.memory.records import ProgramRecord, program_id
from contextevolve.nodes.claim import after_claim, claim
from contextevolve.nodes.compose import compose
from contextevolve.nodes.evaluate import evaluate
from contextevolve.nodes.generate import generate
from contextevolve.nodes.initialize import initialize
from contextevolve.nodes.navigate import Step, navigate, rollout, sample_steps
from contextevolve.nodes.sample import STOP_AFTER_PICKS, sample
from contextevolve.nodes.select_parent import pareto_front, select_parent, stale_parents
from contextevolve.nodes.summarize import finish_abstract, summarize
from contextevolve.nodes.update_buffer import update_buffer
from contextevolve.program.forms import edit_form
from contextevolve.tasks.base import MetricSpec
from contextevolve.tasks.registry import get_task
from contextevolve.workers import commit_report
from tests.conftest import apply, composed, run_node
from tests.fakes import BETTER_PROGRAM, INITIAL, reply, scripted

TASK = get_task("model_placement")


def add_program(memory, n, *, parent="it00000", status="ok", score=21.0, abstract=None, source=None):
    record = ProgramRecord(id=program_id(n), iteration=n, parent_id=parent, status=status,
                           combined_score=score, metrics={"max_kvpr": score - 1, "success_rate": 1.0},
                           abstract=abstract or f"program {n} idea {status}", source=source or INITIAL)
    return memory.commit(record)


def test_initialize_evaluates_and_abstracts_initial_program(seeded_run, models):
    state, memory = seeded_run
    record = memory.buffer.require("it00000")
    assert record.committed and record.status == "ok"
    assert record.combined_score == pytest.approx(21.8916, abs=1e-4)
    assert record.abstract.startswith("Greedy placement")
    assert record.tokens == {"summarizer": {"prompt": 300, "completion": 40}}
    assert state.initial_id == "it00000" and state.worker == 0 and state.stop_reason is None
    assert state.run_identity  # every later node checks the run it drives
    # the run's best and its tokens are read from the buffer (c_0's record)
    assert memory.buffer.best(TASK.higher_is_better).id == "it00000"
    assert memory.buffer.spent()[0] == 340
    # the initial program is abstracted without a parent
    assert "Parent abstract" not in models["summarizer"].seen[0][1].content
    assert memory.index.count() == 1


def test_initialize_is_idempotent(seeded_run, ctx, models):
    state, memory = seeded_run
    again = run_node(initialize, state, ctx)
    assert len(models["summarizer"].seen) == 1 and memory.buffer.count() == 1
    assert apply(state, again) == state and memory.buffer.spent()[0] == 340


@pytest.mark.parametrize("strategy", ["best", "tournament", "random", "pareto"])
def test_select_parent_picks_only_ok_programs(seeded, ctx, strategy):
    state, memory = seeded
    add_program(memory, 1, score=25.0)
    add_program(memory, 2, status="invalid", score=0.0)
    ctx = replace(ctx, parent_selection=strategy)
    picks = {run_node(select_parent, replace(state, iteration=i), ctx)["parent_id"] for i in range(2, 30)}
    assert "it00002" not in picks
    if strategy == "best":
        assert picks == {"it00001"}
    # deterministic per (seed, iteration): replaying an iteration picks the same parent
    assert run_node(select_parent, state, ctx) == run_node(select_parent, state, ctx)


def test_pareto_front_keeps_every_metric_s_leader_that_nothing_dominates():
    specs = [MetricSpec(name="zipf"), MetricSpec(name="scan"),
             MetricSpec(name="misses", higher_is_better=False)]

    def program(pid, zipf, scan, misses):
        return ProgramRecord(id=pid, iteration=0, status="ok", metrics={"zipf": zipf, "scan": scan,
                                                                         "misses": misses})
    recency = program("recency", 0.39, 0.26, 5.0)      # fewest misses only
    frequency = program("frequency", 0.40, 0.42, 9.0)  # best zipf and scan
    tied = program("tied", 0.40, 0.30, 9.0)            # shares the best zipf, but frequency dominates it
    middle = program("middle", 0.35, 0.30, 6.0)        # best on nothing
    assert pareto_front([recency, frequency, tied, middle], specs) == {"recency": 1, "frequency": 2}
    # equal on every metric: neither dominates the other, both hold every best value
    assert pareto_front([recency, program("copy", 0.39, 0.26, 5.0)], specs) == {"recency": 3, "copy": 3}
    # a program without a metric is worse on it than every program with it
    assert pareto_front([program("a", 0.1, 0.1, 1.0), ProgramRecord(id="b", iteration=1, status="ok",
                                                                     metrics={"zipf": 0.2})], specs) \
        == {"a": 2, "b": 1}
    assert pareto_front([ProgramRecord(id="c", iteration=1, status="ok", metrics={"misses": 0.0}),
                         program("d", 0.0, 0.0, 3.0)], specs) == {"c": 1, "d": 2}
    assert pareto_front([], specs) == {} and pareto_front([recency], []) == {}


def test_select_parent_pareto_draws_from_the_front_and_is_a_tournament_with_one_leader(seeded, ctx):
    state, memory = seeded
    for n, score in ((1, 25.0), (2, 23.0), (3, 22.5)):
        add_program(memory, n, score=score)  # success_rate 1.0 everywhere: it00001 alone leads
    pareto = replace(ctx, parent_selection="pareto")
    tournament = replace(ctx, parent_selection="tournament")
    iterations = range(4, 40)
    one_leader = [run_node(select_parent, replace(state, iteration=i), pareto)["parent_id"]
                  for i in iterations]
    assert one_leader == [run_node(select_parent, replace(state, iteration=i), tournament)["parent_id"]
                          for i in iterations]
    assert len(set(one_leader)) > 1  # the tournament's room for others
    # a child that traded success for pressure joins the front; the rest are dominated
    memory.commit(ProgramRecord(id=program_id(4), iteration=4, parent_id="it00001", status="ok",
                                combined_score=24.0, metrics={"max_kvpr": 30.0, "success_rate": 0.5},
                                abstract="risky", source=INITIAL))
    picks = [run_node(select_parent, replace(state, iteration=i), pareto)["parent_id"] for i in range(5, 45)]
    assert set(picks) == {"it00001", "it00004"}


def add_twin(memory, n, parent):
    """A committed twin child of ``parent`` (a failed child stored without source, as generate stores it)."""
    return memory.commit(ProgramRecord(id=program_id(n), iteration=n, parent_id=parent, status="failed",
                                       failure_kind="twin", reason=f"duplicate of {parent}", source=""))


def test_stale_parents_are_those_whose_last_children_were_all_twins(seeded):
    _, memory = seeded
    add_program(memory, 1, score=25.0)
    add_twin(memory, 2, "it00001")
    add_twin(memory, 3, "it00000")
    add_program(memory, 4, parent="it00000")  # a real child after a twin: it00000 is not stale
    add_twin(memory, 5, "it00001")
    records = memory.buffer.committed()
    assert stale_parents(records, 2) == {"it00001"}
    assert stale_parents(records, 1) == {"it00001"}
    assert stale_parents(records, 3) == set()  # it00001 has only two children
    assert stale_parents(records, 0) == set()
    # it00001's last child is iteration 5: it rests through iteration 5 + rest, then may be drawn again
    assert stale_parents(records, 2, now=9, rest=4) == {"it00001"}
    assert stale_parents(records, 2, now=10, rest=4) == set()
    assert stale_parents(records, 2, now=6, rest=0) == set()  # no rest: never left out
    assert stale_parents(records, 2, now=100) == {"it00001"}  # no rest given: for good


@pytest.mark.parametrize("strategy", ["best", "tournament", "random", "pareto"])
def test_select_parent_leaves_a_stale_parent_out_while_another_is_left(seeded, ctx, strategy):
    state, memory = seeded
    add_program(memory, 1, score=25.0)  # the best, and the tournament's pick whenever drawn
    add_twin(memory, 2, "it00001")
    add_twin(memory, 3, "it00001")
    rested = replace(ctx, parent_selection=strategy)  # the default rest: 4 iterations
    ctx = replace(rested, stale_rest=100)  # longer than the run: left out for good
    picks = {run_node(select_parent, replace(state, iteration=i), ctx)["parent_id"] for i in range(4, 30)}
    assert picks == {"it00000"}
    # with the default rest, it00001 (last child at iteration 3) is out for children 4-7 (the state's
    # iteration is the one before its child's), and back from child 8
    picks = {run_node(select_parent, replace(state, iteration=i), rested)["parent_id"] for i in range(3, 7)}
    assert picks == {"it00000"}
    picks = [run_node(select_parent, replace(state, iteration=i), rested)["parent_id"] for i in range(7, 30)]
    assert "it00001" in picks and (strategy != "best" or set(picks) == {"it00001"})
    never = replace(ctx, stale_after=0)  # switched off: it00001 is picked again
    picks = {run_node(select_parent, replace(state, iteration=i), never)["parent_id"] for i in range(4, 30)}
    assert "it00001" in picks
    add_twin(memory, 4, "it00000")
    add_twin(memory, 5, "it00000")  # every ok program is stale: selection runs over all of them again
    picks = {run_node(select_parent, replace(state, iteration=i), ctx)["parent_id"] for i in range(6, 30)}
    assert "it00001" in picks


def test_rollout_categorises_by_metric_deltas(seeded):
    _, memory = seeded
    base = memory.buffer.require("it00000")
    up = ProgramRecord(id="a", iteration=1, parent_id=base.id, status="ok",
                       metrics={"max_kvpr": 25.0, "success_rate": 1.0}, committed=True)
    mixed = ProgramRecord(id="b", iteration=2, parent_id=base.id, status="ok",
                          metrics={"max_kvpr": 25.0, "success_rate": 0.5}, committed=True)
    failed = ProgramRecord(id="c", iteration=3, parent_id=base.id, status="failed", committed=True)
    steps = {s.child.id: s for s in rollout([base, up, mixed, failed], TASK)}
    assert steps["a"].category == "improvement"
    assert steps["b"].category == "mixed"
    assert steps["c"].category == "decline"
    assert steps["a"].deltas["max_kvpr"] == pytest.approx(25.0 - base.metrics["max_kvpr"])


def test_sample_steps_respects_category_weights(seeded, ctx):
    _, memory = seeded
    for n in range(1, 7):
        add_program(memory, n, score=30.0 if n % 2 else 1.0)
    steps = rollout(memory.buffer.committed(), TASK)
    chosen = sample_steps(steps, 10, {"improvement": 1.0, "mixed": 0.0, "decline": 0.0}, rng_for(ctx, 0, "x"))
    assert chosen and all(s.category == "improvement" for s in chosen)
    assert len({s.child.id for s in chosen}) == len(chosen)  # without replacement


def test_navigate_shows_trajectories_and_returns_guidance(seeded, ctx, models):
    state, memory = seeded
    add_program(memory, 1, score=25.0, abstract="projected-pressure greedy")
    state = apply(state, run_node(select_parent, replace(state, iteration=1),
                                  replace(ctx, parent_selection="best")))
    update = run_node(navigate, state, ctx)
    assert update["guidance"] == "Balance projected pressure rather than current pressure."
    assert update["trajectory_ids"] == ["it00001"]
    assert update["iteration_usage"] == {"navigator": {"prompt": 400, "completion": 30}}
    prompt = models["navigator"].seen[-1][1].content
    assert "projected-pressure greedy" in prompt and "[improvement]" in prompt
    assert "no code" in prompt  # directional guidance, not an implementation recipe


def test_navigate_shows_each_abstract_once_and_no_deltas_for_failed_children(seeded, ctx, models):
    state, memory = seeded
    add_program(memory, 1, score=25.0, abstract="projected-pressure greedy")
    for n in (2, 3):
        add_program(memory, n, parent="it00001", status="failed", score=0.0,
                    abstract=f"FAILED (failed): pre-check: smoke run: NameError {n}. Idea it tried: idea {n}")
    state = replace(state, parent_id="it00001", iteration=4)
    run_node(navigate, state, replace(ctx, num_trajectories=3,
                                      category_weights={"improvement": 1.0, "mixed": 1.0, "decline": 1.0}))
    prompt = models["navigator"].seen[-1][1].content
    # three steps, two of them from the current parent: its abstract is shown once, the steps name it
    assert prompt.count("projected-pressure greedy") == 1
    assert "Current parent it00001 (score 25)" in prompt
    assert "it00000 -> it00001: Δmax_kvpr" in prompt
    for n in (2, 3):
        assert f"it00001 -> it0000{n}: the child failed, no metrics" in prompt
        # the status is said once, in the program's summary, not again in its abstract
        assert f"it0000{n} (failed): pre-check: smoke run: NameError {n}" in prompt
    assert "FAILED (failed)" not in prompt and prompt.count("Greedy placement") == 1


def test_navigate_shows_each_step_by_its_line_without_the_lines_it_changed(seeded, ctx, models):
    """As in the paper, the Navigator reads a step through the programs' abstracts, not its changed code."""
    state, memory = seeded
    add_program(memory, 1, score=25.0, source=BETTER_PROGRAM)
    add_program(memory, 2, parent="it00001", score=24.0, source=BETTER_PROGRAM + "\nLIMIT = 3\n")
    state = replace(state, parent_id="it00001", iteration=3)
    weights = {"improvement": 1.0, "mixed": 1.0, "decline": 1.0}
    run_node(navigate, state, replace(ctx, num_trajectories=2, category_weights=weights))
    prompt = models["navigator"].seen[-1][1].content
    assert "it00001 -> it00002" in prompt and "LIMIT = 3" not in prompt


def test_step_delta_text_names_the_failed_side():
    ok = ProgramRecord(id="a", iteration=1, status="ok", combined_score=3.0,
                       metrics={"max_kvpr": 2.0, "success_rate": 1.0})
    bad = ProgramRecord(id="b", iteration=2, status="timeout")
    assert Step(ok, bad, {"max_kvpr": -2.0}, "decline").delta_text() == "the child timed out, no metrics"
    assert Step(bad, ok, {"max_kvpr": 2.0}, "improvement").delta_text() == \
        "the parent timed out; the child runs (score 3)"
    assert Step(ok, ok, {"max_kvpr": 0.5, "success_rate": 0.0}, "improvement").delta_text() == \
        "Δmax_kvpr +0.5, Δsuccess_rate +0"
    assert Step(ok, ok, {"max_kvpr": -0.0, "success_rate": -1e-15}, "mixed").delta_text() == \
        "Δmax_kvpr +0, Δsuccess_rate +0"


def test_navigate_asks_nothing_before_the_first_step(seeded, ctx, models):
    """Only the initial program: no step to distil guidance from, so no call and no guidance."""
    state, _ = seeded
    update = run_node(navigate, replace(state, parent_id="it00000", iteration=1), ctx)
    assert update == {"guidance": "", "trajectory_ids": []} and models["navigator"].seen == []


def test_navigate_is_asked_once_a_step_exists_even_if_none_is_sampled(seeded, ctx, models):
    state, memory = seeded
    add_program(memory, 1)
    update = run_node(navigate, replace(state, parent_id="it00000", iteration=2),
                      replace(ctx, num_trajectories=0))
    assert update["guidance"] and len(models["navigator"].seen) == 1
    assert "none yet" in models["navigator"].seen[-1][1].content


def test_navigate_variants_and_ablation(seeded, ctx, models):
    state, memory = seeded
    add_program(memory, 1)
    state = replace(state, parent_id="it00000")
    run_node(navigate, state, replace(ctx, guidance_variant="implementation"))
    assert "implementation plan" in models["navigator"].seen[-1][1].content
    calls = len(models["navigator"].seen)
    assert run_node(navigate, state, replace(ctx, navigator_enabled=False)) == {"guidance": "",
                                                                                "trajectory_ids": []}
    assert len(models["navigator"].seen) == calls


def test_sample_offers_failed_programs_and_lets_agent_choose(seeded, ctx, models):
    state, memory = seeded
    for n in range(1, 6):
        add_program(memory, n, score=22.0 + n)
    add_program(memory, 6, status="failed", score=0.0, abstract="binary search on a KVPR threshold, crashed")
    state = replace(state, parent_id="it00005", guidance="try thresholds")
    update = run_node(sample, state, replace(ctx, num_exemplars=2))
    assert "it00006" in update["candidate_ids"] and "it00005" not in update["candidate_ids"]
    assert len(update["candidate_ids"]) == 6  # the five other ok programs (c_0 too) and the one failed
    assert update["exemplar_ids"] == update["candidate_ids"][:2]  # the scripted agent answered [1, 2]
    assert "status=failed" in models["sampler"].seen[-1][1].content


def test_top_score_variant_and_ablation_skip_failed_programs(seeded, ctx, models):
    state, memory = seeded
    for n in range(1, 5):
        add_program(memory, n, score=22.0 + n)
    add_program(memory, 5, status="failed", score=0.0)
    state = replace(state, parent_id="it00000")
    top = run_node(sample, state, replace(ctx, sampling_variant="top_score"))
    assert top["candidate_ids"] == ["it00004", "it00003", "it00002", "it00001"]
    calls = len(models["sampler"].seen)
    off = run_node(sample, state, replace(ctx, sampler_enabled=False, num_exemplars=2))
    assert off["exemplar_ids"] == ["it00004", "it00003"] and len(models["sampler"].seen) == calls


def sample_answered(seeded, ctx, models, text: str) -> dict:
    """``sample``'s update for a parent with four other programs in memory, the Sampler answering ``text``."""
    state, memory = seeded
    for n in range(1, 5):
        add_program(memory, n)
    models["sampler"].messages = iter([reply(text)])
    return run_node(sample, replace(state, parent_id="it00000"), replace(ctx, num_exemplars=2))


def test_sampler_reply_is_cut_where_its_picks_end(seeded, ctx, models):
    """The request stops at the ``]`` closing the picks; the cut reply still chooses them."""
    update = sample_answered(seeded, ctx, models, '{\n  "exemplars": [3, 2')
    assert models["sampler"].stops[-1] == STOP_AFTER_PICKS and "]," in STOP_AFTER_PICKS
    assert update["exemplar_ids"] == [update["candidate_ids"][2], update["candidate_ids"][1]]


def test_unusable_sampler_reply_falls_back_to_retrieval_order(seeded, ctx, models):
    update = sample_answered(seeded, ctx, models, "no idea")
    assert update["exemplar_ids"] == update["candidate_ids"][:2]


def test_compose_fits_budget(seeded, ctx):
    state, memory = seeded
    add_program(memory, 1)
    add_program(memory, 2)
    state = replace(state, parent_id="it00000", guidance="g", exemplar_ids=["it00001", "it00002"])
    roomy = run_node(compose, state, replace(ctx, context_token_budget=10_000))
    assert roomy["exemplar_code_ids"] == ["it00001", "it00002"]
    # the prompt knows its size: the same estimate as the messages the Generator gets, rebuilt from the ids
    policy = SearchPolicy.of(ctx, state.iteration, state.worker)
    prompt = prompt_of(policy, TASK, memory, apply(state, roomy))
    assert roomy["context_tokens"] == prompt.tokens == sum(estimate_tokens(str(m.content))
                                                           for m in prompt.messages())
    tight = run_node(compose, state, replace(ctx, context_token_budget=roomy["context_tokens"] - 200))
    assert tight["context_exemplar_ids"] == ["it00001", "it00002"] and len(tight["exemplar_code_ids"]) == 1
    assert tight["context_tokens"] <= roomy["context_tokens"] - 200
    starved = run_node(compose, state, replace(ctx, context_token_budget=10))
    assert starved["context_exemplar_ids"] == [] and starved["exemplar_code_ids"] == []
    assert "exemplar_ids" not in starved  # the Sampler's choice has one writer


def test_generate_writes_pending_child(seeded, ctx, models):
    state, memory = seeded
    state = replace(state, parent_id="it00000", guidance="balance projected pressure")
    update = run_node(generate, composed(state, ctx), ctx)
    assert update == {"iteration_usage": {"generator": {"prompt": 900, "completion": 400}}}
    child = memory.buffer.require(state.child_id)  # the id claim took: generate writes no ids
    assert state.child_id == "it00001" and child.status == "pending" and child.iteration == 1
    assert child.source == BETTER_PROGRAM and child.parent_id == "it00000" and not child.committed
    assert child.guidance == "balance projected pressure"
    assert "balance projected pressure" in models["generator"].seen[-1][1].content


@pytest.mark.parametrize("text, finish, reason", [
    ("I cannot help with that.", "stop", "no code block"),
    ("```python\ndef compute_model_placement(gpu_num, models):\n    return {", "length", "cut off"),
    ("```python\ndef compute_model_placement(gpu_num models):\n    pass\n```", "stop", "syntax error"),
])
def test_malformed_generator_output_is_a_failed_child(seeded, ctx, models, text, finish, reason):
    state, memory = seeded
    models["generator"].messages = iter([reply(text, finish=finish)])
    update = run_node(generate, composed(replace(state, parent_id="it00000"), ctx), ctx)
    child = memory.buffer.require(state.child_id)
    assert child.status == "failed" and reason in child.reason
    # and the rest of the iteration copes with it
    state = apply(replace(state, parent_id="it00000"), update)
    assert run_node(evaluate, state, ctx)["fix_pending"] is False
    assert memory.buffer.require(child.id).status == "failed"
    calls = len(models["summarizer"].seen)
    run_node(summarize, state, ctx)
    assert memory.buffer.require(child.id).abstract.startswith("FAILED (failed): ")
    assert len(models["summarizer"].seen) == calls  # a child that never ran costs no Summarizer call


def test_evaluate_summarize_update_buffer_commit_the_child(seeded, ctx, models):
    state, memory = seeded
    state = apply(replace(state, parent_id="it00000"),
                  run_node(generate, composed(replace(state, parent_id="it00000"), ctx), ctx))
    update = run_node(evaluate, state, ctx)
    assert update == {"fix_pending": False, "repair_due": False}
    state = apply(state, update)
    expected = TASK.evaluate(BETTER_PROGRAM).combined_score
    child = memory.buffer.require(state.child_id)
    assert child.status == "ok" and child.combined_score == pytest.approx(expected)
    state = apply(state, run_node(summarize, state, ctx))
    prompt = models["summarizer"].seen[-1][1].content
    assert "Parent abstract" in prompt and "keeps from the parent" in prompt
    assert state.iteration_usage == {"generator": {"prompt": 900, "completion": 400},
                                     "summarizer": {"prompt": 300, "completion": 40}}
    update = run_node(update_buffer, state, ctx)
    assert update == {"committed": 1, "last_child_id": "it00001"}
    child = memory.buffer.require("it00001")
    assert child.committed and child.abstract and memory.index.count() == 2
    assert child.tokens == {"generator": {"prompt": 900, "completion": 400},
                            "summarizer": {"prompt": 300, "completion": 40}}
    assert child.worker == 0 and child.seconds == state.seconds
    # the run's best and tokens, read from the buffer, now count the child
    assert memory.buffer.best(TASK.higher_is_better).id == "it00001"
    assert memory.buffer.token_usage()["summarizer"] == {"prompt": 600, "completion": 80}
    # what the progress display is told of the committed child (it was a round's lane result)
    report = commit_report(ctx, "it00001")
    assert {k: report[k] for k in ("child_id", "worker", "status", "score", "usage", "reason", "repairs",
                                   "iterations", "best_score", "run_tokens")} == {
        "child_id": "it00001", "worker": 0, "status": "ok", "score": child.combined_score,
        "usage": state.iteration_usage, "reason": "", "repairs": 0, "iterations": 1,
        "best_score": child.combined_score, "run_tokens": 340 + 1640}
    # idempotent replay after a crash
    assert run_node(update_buffer, state, ctx) == update and memory.buffer.count() == 2


def test_summary_variants(seeded, ctx, models):
    state, memory = seeded
    add_program(memory, 1, source=BETTER_PROGRAM)
    state = replace(state, child_id="it00001")
    run_node(summarize, state, replace(ctx, summary_variant="novel_only"))
    assert "ONLY what is new" in models["summarizer"].seen[-1][1].content
    calls = len(models["summarizer"].seen)
    run_node(summarize, state, replace(ctx, summarizer_enabled=False))
    assert len(models["summarizer"].seen) == calls
    assert memory.buffer.require("it00001").abstract == BETTER_PROGRAM[:1500]


def test_the_summarizer_is_shown_no_lines_a_child_changed(seeded, ctx, models):
    """As in the paper, the Summarizer reads the parent's abstract and the child's code only."""
    state, memory = seeded
    add_program(memory, 1, source=BETTER_PROGRAM)
    run_node(summarize, replace(state, child_id="it00001"), ctx)
    shown = models["summarizer"].seen[-1][1].content
    assert "New program:" in shown and "Lines it changed" not in shown
    assert "- kvpr" not in shown and "+ kvpr" not in shown


def test_an_abstract_drops_the_parent_abstract_its_reply_begins_with(seeded, ctx):
    state, memory = seeded
    add_program(memory, 1, source=BETTER_PROGRAM, abstract="Greedy by demand. Picks the least loaded GPU.")
    add_program(memory, 2, parent="it00001", source=BETTER_PROGRAM)
    echo = ("Greedy by demand.  Picks the least\nloaded GPU. Changed: packs by memory first. "
            "Kept: greedy order.")
    summarizer = scripted(reply(echo, 300, 40))
    with use_chat_models(summarizer=summarizer):
        run_node(summarize, replace(state, child_id="it00002"), ctx)
    assert memory.buffer.require("it00002").abstract == "Changed: packs by memory first. Kept: greedy order."
    shown = summarizer.seen[-1][1].content  # the program without its docstrings, its code and comments kept
    assert '"""' in BETTER_PROGRAM and '"""' not in shown and "Greedy: most demanding models first" in shown
    assert "Changed:" in shown and "Kept:" in shown


def test_a_change_copied_from_the_parent_abstract_gives_way_to_the_changed_lines(seeded, ctx):
    """The Summarizer wrote its parent's abstract back: the "Changed:" part says the child's own lines."""
    from contextevolve.program.changes import changed_lines
    from contextevolve.prompts.summarizer import measured_change

    state, memory = seeded
    parent_abstract = "Changed: sorts by demand. It packs greedily. Kept: a heap of GPUs."
    add_program(memory, 1, source=INITIAL, abstract=parent_abstract)
    add_program(memory, 2, parent="it00001", source=BETTER_PROGRAM)
    summarizer = scripted(reply(parent_abstract, 300, 40))
    with use_chat_models(summarizer=summarizer):
        run_node(summarize, replace(state, child_id="it00002"), ctx)
    abstract = memory.buffer.require("it00002").abstract
    [old, new] = changed_lines(INITIAL, BETTER_PROGRAM)
    assert abstract == f"{measured_change([old, new])} Kept: a heap of GPUs."
    assert f"`{new[2:40]}" in abstract and f"where its parent had `{old[2:]}`" in abstract
    own = "Changed: divides by the free memory left. Kept: a heap of GPUs."
    with use_chat_models(summarizer=scripted(reply(own, 300, 40))):
        run_node(summarize, replace(state, child_id="it00002"), ctx)
    assert memory.buffer.require("it00002").abstract == own  # a change of its own is kept


def test_the_measured_change_names_the_lines_taken_out_and_put_in():
    from contextevolve.prompts.summarizer import MEASURED_CHARS, measured_change

    assert (measured_change(["- a = 1", "+ a = 2"])
            == "Changed: its code puts in `a = 2` where its parent had `a = 1`.")
    assert (measured_change(["+ import heapq", "- import heapq", "+ x = 1"])
            == "Changed: its code adds `x = 1`.")  # a moved line is no change
    assert measured_change(["- y = 0"]) == "Changed: its code takes out `y = 0`."
    assert measured_change(["- z", "+ z"]) == "Changed: its code moves lines of its parent's."
    many = measured_change([f"+ v{n} = {'x' * 100}" for n in range(6)])
    assert many.count("`") == 8 and "and 2 more" in many and f"{'x' * (MEASURED_CHARS - 5)}..." in many


@pytest.mark.parametrize("text, parent, truncated, expected", [
    ("A. B. C.", "A. B.", False, "C."),                        # the copied sentences go
    ("A. B.", "A. B.", False, "A. B."),                        # a reply that is only a copy is kept
    ("B. A. C.", "A. B.", False, "C."),                        # in any order
    ("C. A. B.", "A. B.", False, "C. A. B."),                  # ... but only from its start
    ("A. C. A.", "A.", False, "C. A."),
    ("A. New idea. Then", "A.", True, "New idea."),            # cut at the cap: ends on a sentence
    ("A. B. New idea cut", "A. B.", True, "A. B."),            # no whole sentence left: nothing dropped
    ("Changed: nothing. Kept: X, Y.", "Changed: nothing. Kept: X.", False, "Changed: nothing. Kept: X, Y."),
    # the parent's whole abstract, then the child's own: the copy goes, "Changed:" and "Kept:" with it
    ("Changed: heap. Kept: dict. Changed: by rate. Kept: heap.", "Changed: heap. Kept: dict.", False,
     "Changed: by rate. Kept: heap."),
    ("Changed: heap. Kept: dict.", "Changed: heap. Kept: dict.", False, "Changed: heap. Kept: dict."),
    ("Sorts (e.g. by size). Packs.", "Sorts (e.g. by demand). Heap.", False, "Sorts (e.g. by size). Packs."),
    ("New idea.", None, False, "New idea."),                   # the initial program has no parent
    ("", "A.", False, ""),
])
def test_finish_abstract(text, parent, truncated, expected):
    assert finish_abstract(text, parent, truncated) == expected


def test_stop_conditions(seeded, ctx):
    """The stop rules hold run-wide, read from the buffer by ``claim`` once the child is committed."""
    state, memory = seeded
    state = apply(replace(state, parent_id="it00000"),
                  run_node(generate, composed(replace(state, parent_id="it00000"), ctx), ctx))
    state = apply(state, run_node(evaluate, state, ctx))
    state = apply(state, run_node(summarize, state, ctx))
    state = apply(state, run_node(update_buffer, state, ctx))
    assert "target score" in run_node(claim, state, replace(ctx, target_score=22.0))["stop_reason"]
    assert "token budget" in run_node(claim, state, replace(ctx, token_budget=500))["stop_reason"]
    assert "iteration budget" in run_node(claim, state, replace(ctx, max_iterations=1))["stop_reason"]
    stopped = apply(state, run_node(claim, state, replace(ctx, max_iterations=1)))
    assert after_claim(stopped) == END and stopped.last_child_id == "it00001"  # its last child stays readable
    going = run_node(claim, state, replace(ctx, target_score=99.0))
    assert going["stop_reason"] is None and going["child_id"] == "it00002"
    assert after_claim(apply(state, going)) == "select_parent"



def test_without_choice_at_most_half_the_exemplars_are_failed(seeded, ctx, models):
    state, memory = seeded
    add_program(memory, 1, status="failed", score=0.0, abstract="recursive placement, crashed")
    add_program(memory, 2, status="failed", score=0.0, abstract="another crash")
    calls = len(models["sampler"].seen)
    update = run_node(sample, replace(state, parent_id="it00000"), replace(ctx, num_exemplars=2))
    assert sorted(update["candidate_ids"]) == ["it00001", "it00002"]
    assert len(update["exemplar_ids"]) == 1 and len(models["sampler"].seen) == calls


def test_compose_shows_failed_exemplars_without_code(seeded, ctx):
    state, memory = seeded
    add_program(memory, 1)
    add_program(memory, 2, status="failed", score=0.0)
    state = replace(state, parent_id="it00000", exemplar_ids=["it00002", "it00001"])
    update = run_node(compose, state, replace(ctx, context_token_budget=10_000))
    assert (update["context_exemplar_ids"] == ["it00002", "it00001"]
            and update["exemplar_code_ids"] == ["it00001"])


def test_lower_is_better_task_orients_rollout_prompts_and_failures():
    from contextevolve.prompts import generator as gen_prompt
    from contextevolve.prompts import sampler as sampler_prompt

    sak = get_task("sparse_attention")
    base = ProgramRecord(id="p", iteration=0, status="ok", metrics={"density": 0.2, "error": 0.1},
                         committed=True)
    sparser = ProgramRecord(id="a", iteration=1, parent_id="p", status="ok",
                            metrics={"density": 0.1, "error": 0.1}, committed=True)
    # a failed child carries the worst metrics (1.0): a decline, never an "improvement"
    failed = ProgramRecord(id="b", iteration=2, parent_id="p", status="failed",
                           combined_score=sak.worst_score, metrics={m.name: m.worst for m in sak.metrics},
                           committed=True)
    zeroed = ProgramRecord(id="c", iteration=3, parent_id="p", status="invalid",
                           metrics={"density": 0.0, "error": 0.0}, committed=True)
    steps = {s.child.id: s for s in rollout([base, sparser, failed, zeroed], sak)}
    assert steps["a"].category == "improvement" and steps["a"].deltas["density"] == pytest.approx(0.1)
    assert steps["b"].category == steps["c"].category == "decline"
    full = edit_form("full")
    ask = gen_prompt.generator_prompt("t", "parent", "", [], full, sak.higher_is_better,
                                      "").messages()[1].content
    assert "lowers the score (lower is better)" in ask
    pick = sampler_prompt.messages("z", "g", [{"status": "ok", "score": 0.1, "abstract": "x"}], 1, False)
    assert "lower is better" in pick[1].content
    rejected = sak.rejected("failed", "boom")
    assert rejected.combined_score == 1.0 and rejected.metrics == {"density": 1.0, "error": 1.0}
    assert sak.better(0.1, rejected.combined_score) and not sak.better(rejected.combined_score, 0.1)


def test_a_worker_spends_an_even_share_of_the_token_budget_left_at_its_claim(ctx):
    from contextevolve.graph.state import WorkerState
    from contextevolve.loop.stopping import worker_budget_spent

    state = WorkerState(worker=1, iteration=5, run_tokens=1000, workers=2,
                        iteration_usage={"generator": {"prompt": 300, "completion": 100}})
    two = replace(ctx, token_budget=2000, workers=2, max_iterations=10)
    assert not worker_budget_spent(two, state)  # 400 of its 500
    assert worker_budget_spent(two, state, {"repair": {"prompt": 90, "completion": 10}})  # 500 of 500
    alone = replace(state, workers=1)  # claimed as the run's only worker: the whole rest is its share
    assert not worker_budget_spent(replace(two, workers=1), alone,
                                   {"repair": {"prompt": 90, "completion": 10}})
    assert not worker_budget_spent(replace(two, token_budget=None), state,
                                   {"repair": {"prompt": 10**6, "completion": 0}})
    # claimed with two workers, it keeps splitting over two when a resumed run now names one
    assert worker_budget_spent(replace(two, workers=1), state, {"repair": {"prompt": 90, "completion": 10}})


def test_claim_takes_the_next_child_with_the_workers_and_tokens_spent_and_starts_a_fresh_iteration(
        seeded_run, ctx):
    state, memory = seeded_run
    two = replace(ctx, workers=2)
    spent = {"guidance": "old idea", "parent_id": "it00000", "exemplar_ids": ["it00000"], "repair_step": 2,
             "repair_due": True, "iteration_usage": {"generator": {"prompt": 70, "completion": 30}},
             "seconds": {"generate": 3.0}, "llm_calls": [{"role": "generator"}]}
    first = apply(replace(state, **spent), run_node(claim, replace(state, **spent), two))
    assert (first.iteration, first.child_id, first.workers, first.run_tokens) == (0, "it00001", 2, 340)
    assert (first.guidance, first.parent_id, first.exemplar_ids, first.repair_step, first.repair_due) == (
        "", None, [], 0, False)
    assert first.iteration_usage == {} and first.seconds == {} and first.llm_calls == []  # reducers bypassed
    other = run_node(claim, replace(state, worker=1), two)
    assert other["child_id"] == "it00002" and other["iteration"] == 1  # no two workers get the same child
    # a worker whose claimed child is not committed (killed mid-iteration) gets the same child back
    assert run_node(claim, state, two)["child_id"] == "it00001"
    assert memory.buffer.claims() == {1: 0, 2: 1}


def test_the_first_ask_is_hotter_only_when_the_navigator_gave_no_guidance(seeded, ctx, monkeypatch):
    """Without a direction the model mostly writes its parent back, so that first ask samples hotter."""
    from contextevolve.loop import requests
    from contextevolve.loop.generation import Outcome

    state, _ = seeded
    asked = []

    def send(run_ctx, request):
        asked.append(request.temperature)
        return [Outcome(source=BETTER_PROGRAM)]

    monkeypatch.setattr(requests, "send", send)
    own = ctx.llm.temperature_for("generator")
    off = replace(ctx, search=replace(ctx.search, unguided_hotter=0.0))
    ablated = replace(ctx, ablations=replace(ctx.ablations, navigator_enabled=False))  # one change only
    for guidance, run_ctx in (("", ctx), ("Place the largest models first.", ctx), ("", off), ("", ablated)):
        run_node(generate, composed(replace(state, parent_id="it00000", guidance=guidance), run_ctx), run_ctx)
    assert (asked == [pytest.approx(own + ctx.search.unguided_hotter), own, own, own]
            and ctx.search.unguided_hotter > 0)

"""The context agents are asked when they have something new to say, and as in the paper one flag away."""

from __future__ import annotations

from dataclasses import replace

from contextevolve.memory.records import ProgramRecord, program_id
from contextevolve.nodes.navigate import navigate
from contextevolve.nodes.sample import sample
from tests.conftest import apply, run_node
from tests.fakes import INITIAL, reply


def add_child(memory, n, *, score=20.0, status="ok", kind="", parent="it00000"):
    """A committed child of ``parent``, worse than the initial program (the best stays it00000)."""
    return memory.commit(ProgramRecord(
        id=program_id(n), iteration=n, parent_id=parent, status=status, failure_kind=kind,
        combined_score=score, metrics={"max_kvpr": score - 1, "success_rate": 1.0},
        abstract=f"child {n}", source=INITIAL if kind != "twin" else ""))


def test_the_navigator_is_asked_again_only_after_new_evaluated_steps_or_a_new_best(seeded, ctx, models):
    state, memory = seeded
    state = replace(state, parent_id="it00000", iteration=2)
    navigator = models["navigator"]
    navigator.messages = iter([reply(f"guidance {n}.") for n in range(1, 9)])
    add_child(memory, 1)

    def ask(s):
        update = run_node(navigate, s, ctx)
        return apply(s, update), update

    state, first = ask(state)
    assert first["guidance"] == "guidance 1." and len(navigator.seen) == 1
    add_child(memory, 2, kind="twin", status="failed")  # a copy never ran: nothing new
    add_child(memory, 3)  # one evaluated step since: fewer than guidance_refresh_steps (2)
    state, reused = ask(state)
    assert reused == {"guidance": "guidance 1.", "trajectory_ids": first["trajectory_ids"]}
    assert len(navigator.seen) == 1 and "iteration_usage" not in reused
    add_child(memory, 4, status="failed", kind="runtime")  # a second evaluated step: asked again
    state, second = ask(state)
    assert second["guidance"] == "guidance 2." and len(navigator.seen) == 2
    add_child(memory, 5, score=30.0)  # a new best: asked again at once
    state, third = ask(state)
    assert third["guidance"] == "guidance 3." and len(navigator.seen) == 3
    state, _ = ask(replace(state, parent_id="it00001"))  # guidance is written for its parent
    assert len(navigator.seen) == 4
    # the paper's Navigator, one flag away: asked every iteration
    every = replace(ctx, guidance_refresh_steps=0)
    run_node(navigate, state, every)
    assert len(navigator.seen) == 5


def test_an_unusable_guidance_is_not_reused(seeded, ctx, models):
    state, memory = seeded
    state = replace(state, parent_id="it00000", iteration=2)
    add_child(memory, 1)
    models["navigator"].messages = iter([reply(""), reply("now something.")])
    update = run_node(navigate, state, ctx)  # empty (no retries here): no guidance, nothing written
    state = apply(state, update)
    assert update["guidance"] == "" and state.written_after == -1
    assert run_node(navigate, state, ctx)["guidance"] == "now something."


def test_the_sampler_is_asked_only_when_retrieval_leaves_a_real_choice(seeded, ctx, models):
    state, memory = seeded
    for n in (1, 2, 3):
        add_child(memory, n, score=21.0 + n / 10)
    state = replace(state, parent_id="it00000", guidance="try thresholds")
    sampler = models["sampler"]
    # three candidates for two exemplars: retrieval's first two, no call
    few = run_node(sample, state, ctx)
    assert len(few["candidate_ids"]) == 3 and few["exemplar_ids"] == few["candidate_ids"][:2]
    assert sampler.seen == [] and "iteration_usage" not in few
    # the paper's Sampler, one flag away: asked whenever there is more than k to choose from
    paper = run_node(sample, state, replace(ctx, sampler_choice=1))
    assert len(sampler.seen) == 1 and paper["iteration_usage"]
    add_child(memory, 4, score=21.4)  # four candidates: a real choice
    run_node(sample, state, ctx)
    assert len(sampler.seen) == 2


def test_without_a_choice_at_most_half_the_exemplars_are_failed(seeded, ctx, models):
    state, memory = seeded
    for n in (1, 2):
        add_child(memory, n, status="failed", kind="runtime", score=0.0)
    add_child(memory, 3)
    update = run_node(sample, replace(state, parent_id="it00000"), ctx)
    failed = [i for i in update["exemplar_ids"] if i in ("it00001", "it00002")]
    assert len(update["exemplar_ids"]) == 2 and len(failed) == 1 and "it00003" in update["exemplar_ids"]
    assert models["sampler"].seen == []

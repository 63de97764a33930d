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
    add_child(memory, 2, kind="edit", status="failed")  # an edit that did not apply never ran: nothing new
    add_child(memory, 3)  # one evaluated step since: fewer than GUIDANCE_REFRESH_STEPS (2)
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
    add_child(memory, 4, score=21.4)  # four candidates: a real choice
    chosen = run_node(sample, state, ctx)
    assert len(sampler.seen) == 1 and chosen["iteration_usage"]


def test_without_a_choice_at_most_half_the_exemplars_are_failed(seeded, ctx, models):
    state, memory = seeded
    for n in (1, 2):
        add_child(memory, n, status="failed", kind="runtime", score=0.0)
    add_child(memory, 3)
    update = run_node(sample, replace(state, parent_id="it00000"), ctx)
    failed = [i for i in update["exemplar_ids"] if i in ("it00001", "it00002")]
    assert len(update["exemplar_ids"]) == 2 and len(failed) == 1 and "it00003" in update["exemplar_ids"]
    assert models["sampler"].seen == []


def test_over_their_share_of_the_tokens_the_navigator_and_sampler_are_not_asked(seeded, ctx, models):
    state, memory = seeded
    for n in (1, 2, 3, 4):
        add_child(memory, n, score=21.0 + n / 10)
    state = replace(state, parent_id="it00000", iteration=5, guidance="try thresholds")
    navigator, sampler = models["navigator"], models["sampler"]
    navigator.messages = iter([reply(f"guidance {n}.") for n in range(1, 9)])
    state = apply(state, run_node(navigate, state, ctx))  # the context agents have spent nothing yet
    run_node(sample, state, ctx)  # four candidates: a real choice
    assert state.guidance == "guidance 1." and len(navigator.seen) == 1 and len(sampler.seen) == 1
    # a child whose Navigator call took 300 of its 1,000 tokens: over the default share (0.15)
    memory.commit(ProgramRecord(
        id=program_id(5), iteration=5, parent_id="it00000", status="ok", combined_score=20.0,
        metrics={"max_kvpr": 19.0, "success_rate": 1.0}, abstract="child 5", source=INITIAL,
        tokens={"navigator": {"prompt": 250, "completion": 50},
                "generator": {"prompt": 600, "completion": 100}}))
    other = replace(state, parent_id="it00001", iteration=6)  # another parent would ask the Navigator
    update = run_node(navigate, other, ctx)
    assert update["guidance"] == "guidance 1." and "iteration_usage" not in update
    assert len(navigator.seen) == 1
    chosen = run_node(sample, other, ctx)
    assert len(sampler.seen) == 1 and chosen["exemplar_ids"] == chosen["candidate_ids"][:2]
    # the paper's agents, one flag away: asked whatever they spent
    paper = replace(ctx, navigator_sampler_share=1.0)
    assert run_node(navigate, other, paper)["guidance"] == "guidance 2."
    run_node(sample, other, paper)
    assert len(navigator.seen) == 2 and len(sampler.seen) == 2


def test_a_share_is_the_roles_tokens_over_all():
    from contextevolve.roles import share_of
    assert share_of({}, ("navigator",)) == 0.0
    usage = {"navigator": {"prompt": 100, "completion": 0}, "sampler": {"prompt": 50},
             "generator": {"prompt": 200, "completion": 50}, "repair": {"prompt": 100}}
    assert share_of(usage, ("navigator", "sampler")) == 0.3


def test_the_first_guidance_is_written_whatever_was_spent(seeded, ctx, models):
    state, memory = seeded
    memory.commit(ProgramRecord(
        id=program_id(1), iteration=1, parent_id="it00000", status="ok", combined_score=20.0,
        metrics={"max_kvpr": 19.0, "success_rate": 1.0}, abstract="child 1", source=INITIAL,
        tokens={"navigator": {"prompt": 900}, "generator": {"prompt": 100}}))
    models["navigator"].messages = iter([reply("guidance 1.")])
    update = run_node(navigate, replace(state, parent_id="it00000", iteration=2), ctx)
    assert update["guidance"] == "guidance 1."


def test_a_copy_of_the_parent_makes_the_guidance_stale(seeded, ctx, models):
    state, memory = seeded
    add_child(memory, 1)
    state = replace(state, parent_id="it00000", iteration=2)
    navigator = models["navigator"]
    navigator.messages = iter([reply(f"guidance {n}.") for n in range(1, 9)])
    state = apply(state, run_node(navigate, state, ctx))
    assert state.guidance == "guidance 1." and state.written_copies == 0
    add_child(memory, 2, kind="twin", status="failed")  # both asks wrote the parent back
    state = apply(state, run_node(navigate, state, ctx))  # the same prompt would copy again: asked anew
    assert state.guidance == "guidance 2." and len(navigator.seen) == 2 and state.written_copies == 1
    # over the Navigator's and Sampler's share of the tokens, a copy leaves the ask unguided (and hotter)
    memory.commit(ProgramRecord(
        id=program_id(3), iteration=3, parent_id="it00000", status="ok", combined_score=20.0,
        metrics={"max_kvpr": 19.0, "success_rate": 1.0}, abstract="child 3", source=INITIAL,
        tokens={"navigator": {"prompt": 900}, "generator": {"prompt": 100}}))
    add_child(memory, 4, kind="twin", status="failed")
    update = run_node(navigate, state, ctx)
    assert update == {"guidance": "", "trajectory_ids": []} and len(navigator.seen) == 2

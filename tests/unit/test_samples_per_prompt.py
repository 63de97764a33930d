"""Several children per prompt: one request of n choices, tokens per choice, each reply a child of its own."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from contextevolve.graph.context import RunContext
from contextevolve.llm import models
from contextevolve.llm.calls import call_choices, choice_counts
from tests.fake_endpoint import FakeEndpoint, prompt_text, words
from tests.fakes import BETTER_PROGRAM, INITIAL, INVALID_PROGRAM, fenced


@pytest.fixture(autouse=True)
def fresh_refusals(monkeypatch):
    monkeypatch.setattr(models, "_refused", {})


def numbered(body: dict) -> str:
    """A different reply each call: the running count of replies, then words that vary in number."""
    numbered.calls = getattr(numbered, "calls", 0) + 1
    return f"reply {numbered.calls} " + "word " * (numbered.calls % 5 + 6)


def _ctx(url: str, **kw) -> RunContext:
    return RunContext(base_url=url, model="m", api_key="k", max_retries=0, retry_wait_s=0, **kw)


@pytest.mark.parametrize("mode", ["sum", "one"])
def test_one_request_of_n_choices_books_the_prompt_once_and_each_choices_completion(mode):
    """Each reply books its own completion; the prompt is booked once.

    OpenAI's usage (summed over the choices) is shared out so that the replies add up to what it billed;
    llama.cpp's (one choice's) gives way to each choice counted by the endpoint's tokenizer.
    """
    with FakeEndpoint(numbered, choices=mode) as endpoint:
        replies = call_choices("generator", [HumanMessage("one two three")], _ctx(endpoint.url), 3,
                               temperature=0.7, seed=5)
        assert len(endpoint.requests) == 1 and endpoint.requests[0]["n"] == 3
    assert len(replies) == 3 and len({r.text for r in replies}) == 3
    prompts = [r.usage["generator"]["prompt"] for r in replies]
    assert prompts == [words(prompt_text(endpoint.requests[0])), 0, 0]
    completions = [r.usage["generator"]["completion"] for r in replies]
    assert sum(completions) == sum(words(r.text) for r in replies)
    if mode == "one":
        assert completions == [words(r.text) for r in replies]


def test_an_endpoint_that_refuses_n_is_asked_once_per_reply_and_remembered(caplog):
    with FakeEndpoint(numbered, choices="refuse") as endpoint:
        ctx = _ctx(endpoint.url)
        first = call_choices("generator", [HumanMessage("a b")], ctx, 3, temperature=0.7, seed=5)
        second = call_choices("generator", [HumanMessage("a b")], ctx, 2, temperature=0.7, seed=9)
    asked = [(b.get("n"), b.get("seed")) for b in endpoint.requests]
    # refused once, then one choice per request with seeds seed + j; the next prompt never sends n
    assert asked == [(3, 5), (None, 5), (None, 6), (None, 7), (None, 9), (None, 10)]
    assert len(first) == 3 and len(second) == 2
    assert all(r.usage["generator"]["prompt"] == 2 for r in first)  # separate requests each read the prompt
    assert sum("refuses the 'n' parameter" in m for m in caplog.messages) == 1


def test_an_endpoint_that_ignores_n_gets_the_other_replies_asked_for_alone():
    with FakeEndpoint(numbered, choices="ignore") as endpoint:
        replies = call_choices("generator", [HumanMessage("a b")], _ctx(endpoint.url), 3, temperature=0.7,
                               seed=5)
    assert len(replies) == 3 and [b.get("n") for b in endpoint.requests] == [3, None, None]
    assert "n" in models.refused_parameters(endpoint.url, "m")


def test_a_reply_asked_for_alone_is_kept_in_the_transcript_with_its_own_seed(tmp_path):
    from contextevolve.llm import transcript

    with FakeEndpoint(numbered, choices="ignore") as endpoint:
        call_choices("generator", [HumanMessage("a b")], _ctx(endpoint.url, run_dir=str(tmp_path),
                                                              log_prompts=True),
                     3, temperature=0.7, seed=5, label={"kind": "first", "seed": 5, "n": 3})
    assert [(r["request"]["seed"], r["request"]["n"]) for r in transcript.read(tmp_path)] == [
        (5, 3), (6, 1), (7, 1)]


def test_choice_counts_share_a_reported_sum_by_length_and_keep_it_whole():
    assert choice_counts(None, ["aaaa", "aaaaaaaa", "aaaa"], 10) == [3, 5, 2]
    assert choice_counts(None, ["x"], 7) == [7]
    assert sum(choice_counts(None, ["a" * 13, "b" * 7, "c"], 101)) == 101
    # a tokenizer far thriftier than the budget estimate's 3.5 characters: still a sum, never inflated
    assert choice_counts(None, ["x" * 100] * 3, 30) == [10, 10, 10]


def test_call_choices_refuses_no_choices():
    with pytest.raises(ValueError, match="n must be >= 1"):
        call_choices("generator", [HumanMessage("a")], RunContext(), 0, temperature=0.7, seed=0)


def test_samples_per_prompt_below_one_is_refused():
    with pytest.raises(ValueError, match="samples_per_prompt must be >= 1"):
        RunContext(samples_per_prompt=0)


def test_the_generators_embedded_server_gets_a_slot_per_choice():
    ctx = RunContext(workers=2, samples_per_prompt=3)
    assert ctx.server_slots(generator=True) == 6 and ctx.server_slots(generator=False) == 2


PROGRAMS = [BETTER_PROGRAM, INVALID_PROGRAM, BETTER_PROGRAM.replace("1e-9", "1e-6"), INITIAL]


def generator_reply(body: dict) -> str:
    """The Generator's replies in turn: a better program, an invalid one, another better one, the parent."""
    generator_reply.calls = getattr(generator_reply, "calls", -1) + 1
    return fenced(PROGRAMS[generator_reply.calls % len(PROGRAMS)])


def context_reply(body: dict) -> str:
    if body.get("model") == "gen":
        return generator_reply(body)
    if body.get("response_format"):
        return '{"exemplars": [1, 2], "why": "diverse"}'
    return "Greedy placement by projected pressure. Balance the pressure after placing each model."


def test_a_run_makes_n_children_of_each_prompt_evaluates_each_and_books_tokens_once(tmp_path):
    """A run of 6 children at 3 per prompt composes 2 prompts; each reply is a child with its own record."""
    from contextevolve.api import evolve, run_status
    from contextevolve.memory.buffer import EvolveBuffer

    generator_reply.calls = -1
    with FakeEndpoint(context_reply) as endpoint:
        evolve("model_placement", iterations=6, run_dir=tmp_path / "run", base_url=endpoint.url,
               model="ctx", models={"generator": "gen"}, api_key="k", samples_per_prompt=3, max_retries=0,
               seed=0, behavioural_twins=False)
    asks = [b for b in endpoint.requests if b.get("model") == "gen"]
    # one request per prompt, and one second ask for the copies among the second prompt's replies (the
    # parent, it00001's and it00002's programs again), a choice for each
    assert [b.get("n") for b in asks] == [3, 3, 3]
    assert "Make one concrete change" in prompt_text(asks[2])
    buffer = EvolveBuffer(tmp_path / "run" / "buffer.sqlite", read_only=True)
    children = [r for r in buffer.committed() if r.iteration]
    buffer.close()
    assert [r.iteration for r in children] == [1, 2, 3, 4, 5, 6]
    firsts = [r for r in children if not r.sibling_of]
    assert [r.id for r in firsts] == ["it00001", "it00004"]
    for r in children:
        head = next(f for f in firsts if f.id == (r.sibling_of or r.id))
        assert (r.parent_id, r.guidance, r.exemplar_ids) == (head.parent_id, head.guidance, head.exemplar_ids)
    # every reply was evaluated on its own: statuses follow the replies; the second ask wrote stored programs
    # again, so the second prompt's children stay twins
    assert [r.status for r in children[:3]] == ["ok", "invalid", "ok"]
    assert [(r.failure_kind, bool(r.mutation)) for r in children[3:]] == [("twin", True)] * 3
    # the prompt is booked once, on the prompt's first child; every child its own completion
    gen = [r.tokens.get("generator", {}) for r in children]
    prompt = words(prompt_text(asks[0]))
    assert [g.get("prompt", 0) for g in gen[:3]] == [prompt, 0, 0]
    assert sum(g.get("completion", 0) for g in gen[:3]) == sum(words(fenced(p)) for p in PROGRAMS[:3])
    status = run_status(tmp_path / "run")
    assert status["prompts"] == 2 and status["children_per_prompt"] == 3.0


def test_the_counting_proxy_counts_each_choice_where_the_endpoint_reports_one(tmp_path):
    """The counting proxy counts each choice of a request of several with the endpoint's tokenizer.

    llama.cpp's server reports one choice's completion for a request of n: the proxy counts every choice
    with its tokenizer, so a comparison at equal tokens charges n replies what n requests would cost.
    """
    from openai import OpenAI

    from contextevolve.compare.proxy import CountingProxy

    with (FakeEndpoint(numbered, choices="one") as endpoint,
          CountingProxy(endpoint.url, log_path=tmp_path / "requests.jsonl") as proxy):
        reply = OpenAI(base_url=proxy.url("contextevolve-s0"), api_key="none").chat.completions.create(
            model="fake", messages=[{"role": "user", "content": "a b c"}], n=3)
        texts = [c.message.content for c in reply.choices]
        assert len(texts) == 3
        (record,) = proxy.records("contextevolve-s0")
        assert record.completion_tokens == sum(words(t) for t in texts) == reply.usage.completion_tokens
        assert record.prompt_tokens == 3


def test_claims_of_a_prompt_are_distinct_bounded_and_found_again_after_a_lost_checkpoint(tmp_path):
    """A prompt's claims are numbers no one holds, up to the budget, found again by their worker.

    A worker's claims without a stored child come back to it first; a stored child is its next iteration
    (stored_reply) until committed.
    """
    from contextevolve.memory.buffer import EvolveBuffer
    from contextevolve.memory.records import ProgramRecord, program_id

    buffer = EvolveBuffer(tmp_path / "buffer.sqlite")
    first = buffer.claim(0, limit=7)
    assert (first, buffer.claim_more(0, 7, 2, first)) == (1, [2, 3])
    other = buffer.claim(1, limit=7)
    assert (other, buffer.claim_more(1, 7, 2, other)) == (4, [5, 6])
    assert buffer.claim_more(2, 7, 2, 0) == [7]  # the budget leaves one
    # worker 0 lost its checkpoint: its claims come back, the lowest first, then the others it holds
    assert buffer.claim(0, limit=7) == 1 and buffer.claim_more(0, 7, 2, 1) == [2, 3]
    buffer.put(ProgramRecord(id=program_id(2), iteration=2, parent_id=program_id(0),
                             sibling_of=program_id(1)))
    assert buffer.stored_reply(0) == 2 and buffer.stored_reply(1) is None
    record = buffer.require(program_id(2))
    record.committed = True
    buffer.put(record)
    assert buffer.stored_reply(0) is None
    buffer.close()


def test_a_stored_reply_is_evaluated_even_after_a_stop_rule_holds(tmp_path):
    """A run stopped by its token budget still commits the replies its last prompt stored.

    Their tokens are spent: no child is left uncommitted, and the prompt's children share its context.
    """
    from contextevolve.api import evolve
    from contextevolve.memory.buffer import EvolveBuffer

    generator_reply.calls = -1
    run = dict(run_dir=tmp_path / "run", base_url="", model="ctx", models={"generator": "gen"}, api_key="k",
               samples_per_prompt=3, max_retries=0, seed=0, behavioural_twins=False)
    with FakeEndpoint(context_reply) as endpoint:
        run["base_url"] = endpoint.url
        evolve("model_placement", iterations=0, **run)  # the initial program only: its tokens
        buffer = EvolveBuffer(tmp_path / "run" / "buffer.sqlite", read_only=True)
        initial = buffer.spent()[0]
        buffer.close()
        evolve("model_placement", iterations=9, resume=True, token_budget=initial + 1, **run)
    buffer = EvolveBuffer(tmp_path / "run" / "buffer.sqlite", read_only=True)
    with buffer._lock:
        uncommitted = buffer._db.execute("SELECT COUNT(*) FROM programs WHERE committed = 0").fetchone()[0]
    children = [r for r in buffer.committed() if r.iteration]
    buffer.close()
    assert uncommitted == 0 and [r.iteration for r in children] == [1, 2, 3]
    assert [r.sibling_of for r in children] == ["", "it00001", "it00001"]


def test_near_a_token_budget_a_prompt_asks_only_the_replies_the_workers_share_pays_for():
    from contextevolve.loop.stopping import replies_within_budget

    ctx = RunContext(run_dir="unused", token_budget=10_000, search={"samples_per_prompt": 3})
    assert replies_within_budget(ctx, 2, (900, 0), 1) == 2  # nothing committed yet: nothing to average
    assert replies_within_budget(ctx, 2, (2_000, 2), 1) == 2  # 8,000 left at 1,000 a child
    assert replies_within_budget(ctx, 2, (7_500, 5), 1) == 0  # 2,500 left at 1,500: this child alone
    assert replies_within_budget(ctx, 2, (6_000, 6), 1) == 2
    assert replies_within_budget(ctx, 2, (6_000, 6), 2) == 1  # two workers share what is left
    assert replies_within_budget(RunContext(run_dir="unused"), 2, (10**9, 1), 4) == 2  # no token budget


def test_a_copy_among_a_prompts_replies_is_asked_again_and_replaced_by_a_new_program(tmp_path):
    """A reply that writes its parent back gets the second ask; a new program from it is the child."""
    from contextevolve.api import evolve
    from contextevolve.memory.buffer import EvolveBuffer

    firsts = iter([BETTER_PROGRAM, INITIAL, INVALID_PROGRAM])
    other = BETTER_PROGRAM.replace("1e-9", "1e-6")

    def reply_to(body: dict) -> str:
        if body.get("model") != "gen":
            return context_reply(body)
        return fenced(other if "Make one concrete change" in prompt_text(body) else next(firsts))

    with FakeEndpoint(reply_to) as endpoint:
        evolve("model_placement", iterations=3, run_dir=tmp_path / "run", base_url=endpoint.url,
               model="ctx", models={"generator": "gen"}, api_key="k", samples_per_prompt=3, max_retries=0,
               seed=0, behavioural_twins=False)
    asks = [b for b in endpoint.requests if b.get("model") == "gen"]
    assert [b.get("n") for b in asks] == [3, None]  # the second ask: one choice, for the one copy
    buffer = EvolveBuffer(tmp_path / "run" / "buffer.sqlite", read_only=True)
    children = [r for r in buffer.committed() if r.iteration]
    buffer.close()
    assert [r.status for r in children] == ["ok", "ok", "invalid"]
    assert children[1].source == other and children[1].mutation and children[1].sibling_of == "it00001"
    # the second ask's tokens are the copy's: its prompt and its completion
    assert children[1].tokens["generator"]["prompt"] == words(prompt_text(asks[1]))

"""Phase 3, Sampler: retrieve candidates by relevance to z_p + g with diversity, then let the agent pick k.

Retrieval (``sampling_variant="informative"``, the paper's design): :data:`CANDIDATE_POOL` candidates, MMR
over the abstract index among ok programs, with :data:`FAILED_CANDIDATES` slots among failed, invalid and
timed-out ones; ``top_score`` offers only the best-scoring programs (the ablated takeaway c). The agent picks
``num_exemplars``; an unusable reply falls back to the retrieval order. Without a real choice (fewer than
k + :data:`SAMPLER_CHOICE` candidates) the agent is not called: the first k in retrieval order are taken, at
most ceil(k/2) of them failed programs; so they are once the Navigator and the Sampler have spent
``search.navigator_sampler_share`` of the run's tokens.
Why failed programs are offered, and capped: docs/decisions/failed-exemplars.md.
"""

from __future__ import annotations

import re

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.llm.calls import MalformedReply, call_role
from contextevolve.llm.parsing import parse_json_object
from contextevolve.loop.resources import memory_of, task_of
from contextevolve.loop.spending import share_spent
from contextevolve.memory.store import RunMemory
from contextevolve.memory.vectors import NO_EFFECT, Candidate
from contextevolve.prompts import sampler as prompt
from contextevolve.tasks.base import Task

CANDIDATE_POOL = 6
"""Candidates retrieved (MMR) for the Sampler agent to choose from."""
FAILED_CANDIDATES = 2
"""Of those, how many slots are reserved for failed, invalid and timed-out programs
(docs/decisions/failed-exemplars.md)."""
SAMPLER_CHOICE = 2
"""The Sampler agent is asked only when retrieval offers at least ``num_exemplars`` + this many candidates, a
real choice; with fewer the exemplars are retrieval's first (at most half of them failed). The paper asks it
whenever there are more candidates than exemplars (1)."""
STOP_AFTER_PICKS = ["],", "]}", "]\n"]
"""Stop sequences of the Sampler's request: the reply ends where ``"exemplars": [...`` closes.

The list's close counts only before the next key, the object's end or a line end (a ``"[3]"`` in a
string or a "why" citing ``[2]`` does not end it); a reply that matches none runs to its cap. The prompt
still asks for a "why" after the list, so a reply reads as asked, but no node reads it, and the picks
before the cut are those the whole reply would hold (docs/decisions/sampler-stop.md)."""


def top_scoring(memory: RunMemory, task: Task, n: int, exclude: set[str]) -> list[Candidate]:
    """The ``n`` best ok programs (excluding ``exclude`` and behavioural twins) as candidates."""
    ok = [r for r in memory.buffer.committed() if r.useful and r.id not in exclude]
    ok.sort(key=lambda r: r.combined_score, reverse=task.higher_is_better)
    return [Candidate(r.id, r.abstract, r.status, r.combined_score, r.metrics) for r in ok[:n]]


def retrieve(memory: RunMemory, query: str, ctx: RunContext, exclude: set[str]) -> list[Candidate]:
    """Candidates for the Sampler: MMR among ok programs, plus MMR among failed ones.

    Behavioural twins are neither (:data:`~contextevolve.memory.vectors.NO_EFFECT`): their code adds
    nothing to what they copy.
    """
    query_emb = memory.index.embed(query)  # embedded once, used by both retrievals
    failed = memory.index.retrieve(query_emb, k=FAILED_CANDIDATES,
                                   where={"status": {"$nin": ["ok", NO_EFFECT]}}, exclude=exclude)
    ok = memory.index.retrieve(query_emb, k=CANDIDATE_POOL - len(failed),
                               where={"status": "ok"}, exclude=exclude)
    return ok + failed


def first_in_order(candidates: list[Candidate], k: int) -> list[str]:
    """Ids of the first ``k`` candidates in retrieval order, at most ceil(k/2) (and at least one) failed."""
    cap, failed, chosen = max(1, (k + 1) // 2), 0, []
    for c in candidates:
        if len(chosen) == k:
            break
        if c.status != "ok":
            if failed == cap:
                continue
            failed += 1
        chosen.append(c.id)
    return chosen


def parse_choice(text: str, n_candidates: int, k: int) -> list[int] | None:
    """0-based candidate indices chosen in the Sampler's reply, or None if unusable.

    Accepts ``{"exemplars": [2, 5]}``, strings like ``"[2]"`` inside it, a reply cut at the list's
    end (``{"exemplars": [2, 5``: the numbers after the first key, :data:`STOP_AFTER_PICKS`), or bare
    numbers.
    """
    data = parse_json_object(text)
    raw = data.get("exemplars") if isinstance(data, dict) else None
    if isinstance(raw, (int, str)):
        raw = [raw]
    if not isinstance(raw, list):
        _, key, after = text.partition("exemplars")
        raw = re.findall(r"\d+", after if key else text)
    picks: list[int] = []
    for item in raw:
        match = re.search(r"\d+", str(item))
        if match and 1 <= int(match.group()) <= n_candidates and int(match.group()) - 1 not in picks:
            picks.append(int(match.group()) - 1)
    return picks[:k] or None


def sample(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
    """Choose the exemplars E_ctx for this iteration."""
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    exclude = {state.parent_id}
    k = ctx.search.num_exemplars
    if not ctx.ablations.sampler_enabled:
        chosen = top_scoring(memory, task, k, exclude)
        return {"candidate_ids": [c.id for c in chosen], "exemplar_ids": [c.id for c in chosen]}
    parent = memory.buffer.require(state.parent_id)
    if ctx.ablations.sampling_variant == "top_score":
        candidates = top_scoring(memory, task, CANDIDATE_POOL, exclude)
    else:
        candidates = retrieve(memory, f"{parent.abstract}\n{state.guidance}", ctx, exclude)
    ids = [c.id for c in candidates]
    if len(candidates) < k + SAMPLER_CHOICE or share_spent(ctx):
        # no real choice, or the agent's share of the tokens spent: retrieval's first k
        return {"candidate_ids": ids, "exemplar_ids": first_in_order(candidates, k)}
    messages = prompt.messages(parent.abstract, state.guidance, [
        {"status": c.status, "score": c.combined_score, "abstract": c.abstract} for c in candidates], k,
        task.higher_is_better)
    try:
        reply = call_role("sampler", messages, ctx, json_mode=True, stop=STOP_AFTER_PICKS,
                          seed=ctx.worker_seed(state.worker))
        text, usage = reply.text, reply.usage
    except MalformedReply as exc:
        text, usage = "", exc.usage
    picks = parse_choice(text, len(candidates), k) or list(range(k))
    return {"candidate_ids": ids, "exemplar_ids": [ids[i] for i in picks], "iteration_usage": usage}

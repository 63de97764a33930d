"""Phase 3, Sampler: retrieve candidates by relevance to z_p + g with diversity, then let the agent pick k.

Retrieval (``sampling_variant="informative"``, the paper's design): Maximal Marginal
Relevance over the abstract index among ok programs, plus ``failed_candidates`` slots
filled by MMR among failed/invalid/timed-out programs — failed programs are explicitly
offered because a broken implementation of a good idea can seed a breakthrough (paper
§Takeaways c). ``top_score`` offers only the best-scoring programs (the ablated
takeaway). The Sampler agent then picks ``num_exemplars``; its JSON reply is parsed
tolerantly and an unusable reply (also one the endpoint keeps garbling after the retries)
falls back to the retrieval order. The reply is cut where its list of picks closes
(:data:`STOP_AFTER_PICKS`): the "why" the prompt asks for comes after the list, so it cannot change
the picks, and nothing reads it. When there are no more candidates than exemplars the agent is not
called, and at most ceil(k/2) of them may be failed programs (with a weak model, all-failed
exemplars were copied bug for bug).
"""

from __future__ import annotations

import re

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.llm.calls import MalformedReply, call_role
from contextevolve.llm.parsing import parse_json_object
from contextevolve.loop.resources import memory_of, task_of
from contextevolve.memory.store import RunMemory
from contextevolve.memory.vectors import Candidate
from contextevolve.prompts import sampler as prompt
from contextevolve.tasks.base import Task

STOP_AFTER_PICKS = ["],", "]}", "]\n"]
"""Stop sequences of the Sampler's request: the reply ends where ``"exemplars": [...`` closes.

The list's close counts when followed by the next key, the object's end or a line end (a ``"[3]"``
inside a string or a "why" citing ``[2]`` does not end it; a reply that matches none runs to its cap
as before). The prompt still asks for a "why" after the list (a reply then reads as the agent was
asked to answer), but a model decodes left to right, so the picks before the cut are the ones the
whole reply would hold (same prompt, same seed), and no node reads the reason. On the embedded model
the "why" filled the rest of the Sampler's token cap in the stored replies (what the cut saves:
docs/decisions/sampler-stop.md)."""


def top_scoring(memory: RunMemory, task: Task, n: int, exclude: set[str]) -> list[Candidate]:
    """The ``n`` best ok programs (excluding ``exclude``) as candidates."""
    ok = [r for r in memory.buffer.committed() if r.status == "ok" and r.id not in exclude]
    ok.sort(key=lambda r: r.combined_score, reverse=task.higher_is_better)
    return [Candidate(r.id, r.abstract, r.status, r.combined_score, r.metrics) for r in ok[:n]]


def retrieve(memory: RunMemory, query: str, ctx: RunContext, exclude: set[str]) -> list[Candidate]:
    """Candidates for the Sampler: MMR among ok programs, plus MMR among failed ones."""
    failed_slots = min(ctx.search.failed_candidates, ctx.search.candidate_pool)
    query_emb = memory.index.embed(query)  # embedded once, used by both retrievals
    failed = memory.index.retrieve(query_emb, k=failed_slots, where={"status": {"$ne": "ok"}},
                                   exclude=exclude)
    ok = memory.index.retrieve(query_emb, k=ctx.search.candidate_pool - len(failed),
                               where={"status": "ok"}, exclude=exclude)
    return ok + failed


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
        candidates = top_scoring(memory, task, ctx.search.candidate_pool, exclude)
    else:
        candidates = retrieve(memory, f"{parent.abstract}\n{state.guidance}", ctx, exclude)
    ids = [c.id for c in candidates]
    if len(candidates) <= k:  # nothing to choose: take them all, but at most ceil(k/2) failed ones
        failed = [c.id for c in candidates if c.status != "ok"]
        keep = set(failed[:max(1, (k + 1) // 2)])
        return {"candidate_ids": ids,
                "exemplar_ids": [c.id for c in candidates if c.status == "ok" or c.id in keep]}
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

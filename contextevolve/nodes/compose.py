"""Phase 4, Compose: build the generator context Φ = (z_p, g, E_ctx) within a token budget.

The parent's code, abstract and scores and the guidance are always included. Exemplars
enter as abstracts; each working exemplar's code is added, in the Sampler's order, only
while the estimated prompt stays within ``RunContext.context_token_budget``. Failed
exemplars are shown as abstract + error only: they contribute their idea (paper,
takeaway c), while their code was seen to be copied bug for bug by a small model. If even the abstracts
do not fit, exemplars are dropped from the end. State keeps only the resulting ids; the
Generator re-renders the same messages with :func:`render`.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import EvolveState
from contextevolve.llm.calls import estimate_tokens
from contextevolve.memory.store import RunMemory
from contextevolve.nodes.resources import memory_of, task_of
from contextevolve.prompts import generator as prompt
from contextevolve.tasks.base import Task


def render(ctx: RunContext, task: Task, memory: RunMemory, parent_id: str, guidance: str,
           exemplar_ids: list[str], code_ids: set[str]) -> list:
    """Generator messages for this parent, guidance and exemplars (code only for ``code_ids``)."""
    parent = memory.buffer.require(parent_id)
    parent_text = prompt.parent_section(parent.source, parent.abstract, parent.combined_score, parent.metrics,
                                        parent.diagnostics)
    sections = []
    for n, pid in enumerate(exemplar_ids, 1):
        ex = memory.buffer.require(pid)
        sections.append(prompt.exemplar_section(n, prompt.Exemplar(
            status=ex.status, score=ex.combined_score, abstract=ex.abstract, reason=ex.reason,
            code=ex.source if pid in code_ids and ex.source else None)))
    return prompt.messages(task.description, parent_text, guidance, sections, ctx.generation_mode)


def _tokens(messages: list) -> int:
    return sum(estimate_tokens(str(m.content)) for m in messages)


def compose(state: EvolveState, runtime: Runtime[RunContext]) -> dict:
    """Decide which exemplars (and which exemplars' code) fit in the context budget."""
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    budget = ctx.context_token_budget
    exemplars = list(state.exemplar_ids)

    def size(ids: list[str], code: set[str]) -> int:
        return _tokens(render(ctx, task, memory, state.parent_id, state.guidance, ids, code))

    tokens = size(exemplars, set())
    while exemplars and tokens > budget:
        exemplars.pop()
        tokens = size(exemplars, set())
    with_code: set[str] = set()
    for pid in exemplars:
        exemplar = memory.buffer.require(pid)
        if exemplar.status != "ok" or not exemplar.source:  # failed programs lend ideas, not buggy code
            continue
        trial = size(exemplars, with_code | {pid})
        if trial <= budget:
            with_code.add(pid)
            tokens = trial
    return {"exemplar_ids": exemplars, "exemplar_code_ids": [p for p in exemplars if p in with_code],
            "context_tokens": tokens}

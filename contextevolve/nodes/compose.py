"""Phase 4, Compose: build the generator context Φ = (z_p, g, E_ctx) within a token budget.

The parent's code, abstract and scores and the guidance are always included. Exemplars
enter as abstracts; each working exemplar's code is added, in the Sampler's order, only
while the estimated prompt stays within ``RunContext.context_token_budget``. Failed
exemplars are shown as abstract + error only: they contribute their idea (paper,
takeaway c), while their code was seen to be copied bug for bug by a small model. If even the abstracts
do not fit, exemplars are dropped from the end. State keeps only the resulting ids; the
Generator re-renders the same messages with :func:`load` and :func:`render`.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import LaneState
from contextevolve.llm.calls import estimate_tokens
from contextevolve.memory.records import ProgramRecord
from contextevolve.memory.store import RunMemory
from contextevolve.nodes.resources import memory_of, task_of
from contextevolve.prompts import generator as prompt
from contextevolve.tasks.base import Task


def render(ctx: RunContext, task: Task, parent: ProgramRecord, guidance: str, exemplars: list[ProgramRecord],
           code_ids: set[str]) -> list:
    """Generator messages for this parent, guidance and exemplars (code only for ids in ``code_ids``)."""
    parent_text = prompt.parent_section(parent.source, parent.abstract, parent.combined_score, parent.metrics,
                                        parent.diagnostics)
    sections = [prompt.exemplar_section(n, prompt.Exemplar(
        status=ex.status, score=ex.combined_score, abstract=ex.abstract, reason=ex.reason,
        code=ex.source if ex.id in code_ids and ex.source else None)) for n, ex in enumerate(exemplars, 1)]
    return prompt.messages(task.description, parent_text, guidance, sections, ctx.generation_mode,
                           task.higher_is_better, parent_source=parent.source)


def load(memory: RunMemory, parent_id: str, exemplar_ids: list[str]) -> tuple[ProgramRecord, list[ProgramRecord]]:
    """The parent and exemplar records, read once from the Evolve Buffer."""
    return memory.buffer.require(parent_id), [memory.buffer.require(pid) for pid in exemplar_ids]


def _tokens(messages: list) -> int:
    return sum(estimate_tokens(str(m.content)) for m in messages)


def compose(state: LaneState, runtime: Runtime[RunContext]) -> dict:
    """Decide which exemplars (and which exemplars' code) fit in the context budget."""
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    budget = ctx.context_token_budget
    parent, exemplars = load(memory, state.parent_id, state.exemplar_ids)

    def size(chosen: list[ProgramRecord], code: set[str]) -> int:
        return _tokens(render(ctx, task, parent, state.guidance, chosen, code))

    tokens = size(exemplars, set())
    while exemplars and tokens > budget:
        exemplars.pop()
        tokens = size(exemplars, set())
    with_code: set[str] = set()
    for exemplar in exemplars:
        if exemplar.status != "ok" or not exemplar.source:  # failed programs lend ideas, not buggy code
            continue
        trial = size(exemplars, with_code | {exemplar.id})
        if trial <= budget:
            with_code.add(exemplar.id)
            tokens = trial
    return {"exemplar_ids": [e.id for e in exemplars],
            "exemplar_code_ids": [e.id for e in exemplars if e.id in with_code], "context_tokens": tokens}

"""Phase 4, Compose: build the generator context Φ = (z_p, g, E_ctx) within a token budget.

The parent's code, abstract and scores and the guidance are always included. Exemplars
enter as abstracts; each working exemplar's code is added, in the Sampler's order, only
while the estimated prompt stays within ``RunContext.search.context_token_budget``. Failed
exemplars are shown as abstract + error only: they contribute their idea (paper,
takeaway c), while their code was seen to be copied bug for bug by a small model. If even the abstracts
do not fit, exemplars are dropped from the end. State keeps only the resulting ids
(``context_exemplar_ids``, ``exemplar_code_ids``); the Generator renders the messages from them
with :func:`load` and :func:`render`; the child's record keeps ``context_exemplar_ids`` as its exemplars.
"""

from __future__ import annotations

import math

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.llm.calls import CHARS_PER_TOKEN, estimate_tokens
from contextevolve.memory.records import ProgramRecord
from contextevolve.memory.store import RunMemory
from contextevolve.nodes.resources import memory_of, task_of
from contextevolve.prompts import generator as prompt
from contextevolve.tasks.base import Task


def shown(ctx: RunContext, source: str) -> str:
    """``source`` as the Generator sees it: without docstrings (:func:`prompts.generator.without_docstrings`)
    in ``functions`` mode, and in ``full`` mode with ``search.docstrings_shown`` off; else as it is (``diff``
    mode's SEARCH parts must match the program as it is).

    Why: a small model copies what it is shown, so every rewrite repeats the docstrings, 27-45 % of the
    built-in tasks' initial programs by characters, at 10-13 decoded tokens per second. A child keeps its
    parent's docstrings all the same, those of top-level functions and classes and of classes' methods
    (:func:`contextevolve.splicing.restore_docstrings` for a rewrite, the splice in ``functions`` mode).
    In ``full`` mode they stay shown by default: without them the embedded model copied its parent more
    often (docs/results.md, "Programs shown without docstrings")."""
    mode = ctx.search.generation_mode
    hidden = mode == "functions" or (mode == "full" and not ctx.search.docstrings_shown)
    return prompt.without_docstrings(source) if hidden else source


def _section(ctx: RunContext, n: int, ex: ProgramRecord, with_code: bool) -> str:
    return prompt.exemplar_section(n, prompt.Exemplar(
        status=ex.status, score=ex.combined_score, abstract=ex.abstract, reason=ex.reason,
        code=shown(ctx, ex.source) if with_code and ex.source else None))


def parent_text(ctx: RunContext, parent: ProgramRecord) -> str:
    """The parent's section of the Generator's prompt (scores, abstract, code as :func:`shown`); a
    restart repeats it word for word, so its request starts with tokens the server has just read."""
    return prompt.parent_section(shown(ctx, parent.source), parent.abstract, parent.combined_score,
                                 parent.metrics, parent.diagnostics)


def render(ctx: RunContext, task: Task, parent: ProgramRecord, guidance: str, exemplars: list[ProgramRecord],
           code_ids: set[str]) -> list:
    """Generator messages for this parent, guidance and exemplars (code only for ids in ``code_ids``)."""
    sections = [_section(ctx, n, ex, ex.id in code_ids) for n, ex in enumerate(exemplars, 1)]
    return prompt.messages(task.description, parent_text(ctx, parent), guidance, sections, ctx.search.generation_mode,
                           task.higher_is_better, parent_source=parent.source)


def load(memory: RunMemory, parent_id: str, exemplar_ids: list[str]) -> tuple[ProgramRecord, list[ProgramRecord]]:
    """The parent and exemplar records, read once from the Evolve Buffer."""
    return memory.buffer.require(parent_id), [memory.buffer.require(pid) for pid in exemplar_ids]


def compose(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
    """Decide which exemplars (and which exemplars' code) fit in the context budget.

    Measures once: the prompt without exemplars is rendered once and each exemplar's section once
    with and once without code; a choice's size is then a sum of their lengths, exactly
    :func:`~contextevolve.llm.calls.estimate_tokens` summed over the messages :func:`render` builds.
    Writes ``context_exemplar_ids`` (the Sampler's ``exemplar_ids`` stay its own).
    """
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    budget = ctx.search.context_token_budget
    parent, exemplars = load(memory, state.parent_id, state.exemplar_ids)
    system, request = (str(m.content) for m in render(ctx, task, parent, state.guidance, [], set()))
    plain = [_section(ctx, n, ex, False) for n, ex in enumerate(exemplars, 1)]
    coded = [_section(ctx, n, ex, True) for n, ex in enumerate(exemplars, 1)]

    def size(count: int, code: set[int]) -> int:
        sections = [coded[i] if i in code else plain[i] for i in range(count)]
        extra = len(prompt.exemplars_part(sections))
        return estimate_tokens(system) + math.ceil((len(request) + (extra + 2 if extra else 0)) / CHARS_PER_TOKEN)

    count = len(exemplars)
    tokens = size(count, set())
    while count and tokens > budget:
        count -= 1
        tokens = size(count, set())
    with_code: set[int] = set()
    for i in range(count):
        if exemplars[i].status != "ok" or not exemplars[i].source:  # failed programs lend ideas, not buggy code
            continue
        trial = size(count, with_code | {i})
        if trial <= budget:
            with_code.add(i)
            tokens = trial
    return {"context_exemplar_ids": [e.id for e in exemplars[:count]],
            "exemplar_code_ids": [exemplars[i].id for i in sorted(with_code)], "context_tokens": tokens}

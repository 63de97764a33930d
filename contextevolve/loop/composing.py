"""The Generator's prompt Φ = (z_p, g, E_ctx) for an iteration, within a token budget.

The parent's code, abstract and scores and the guidance are always included. Exemplars enter as abstracts;
each working exemplar's code is added, in the Sampler's order, while the prompt stays within the budget; a
failed exemplar shows its abstract and error only (why: docs/decisions/failed-exemplars.md). If even the
abstracts do not fit, exemplars are dropped from the end. ``compose`` keeps only the ids :func:`build_prompt`
chose, so a checkpoint holds no program text; :func:`prompt_of` builds the same prompt again from them.
"""

from __future__ import annotations

from dataclasses import replace

from contextevolve.graph.state import WorkerState
from contextevolve.loop.policy import SearchPolicy
from contextevolve.memory.records import ProgramRecord
from contextevolve.memory.store import RunMemory
from contextevolve.prompts import generator as prompt
from contextevolve.prompts.generator import GeneratorPrompt
from contextevolve.tasks.base import Task


def parent_text(policy: SearchPolicy, parent: ProgramRecord) -> str:
    """The parent's part of the Generator's prompt (scores, abstract, code as the policy shows it)."""
    return prompt.parent_section(policy.shown(parent.source), parent.abstract, parent.combined_score,
                                 parent.metrics, parent.diagnostics)


def _section(policy: SearchPolicy, n: int, ex: ProgramRecord, with_code: bool) -> str:
    return prompt.exemplar_section(n, prompt.Exemplar(
        status=ex.status, score=ex.combined_score, abstract=ex.abstract, reason=ex.reason,
        code=policy.shown(ex.source) if with_code and ex.source else None))


def _shows_code(ex: ProgramRecord) -> bool:
    """Whether an exemplar may show its code: failed programs lend ideas, not buggy code."""
    return ex.status == "ok" and bool(ex.source)


def _prompt(policy: SearchPolicy, task: Task, parent: ProgramRecord, guidance: str,
            exemplars: list[ProgramRecord], sections: list[str], code_ids: list[str]) -> GeneratorPrompt:
    return prompt.generator_prompt(task.description, parent_text(policy, parent), guidance, sections,
                                   policy.form, task.higher_is_better, parent.source,
                                   exemplar_ids=[e.id for e in exemplars], code_ids=code_ids)


def build_prompt(policy: SearchPolicy, task: Task, parent: ProgramRecord, guidance: str,
                 exemplars: list[ProgramRecord], budget: int) -> GeneratorPrompt:
    """The Generator's prompt for this parent, guidance and the Sampler's exemplars, within ``budget``.

    ``budget`` is in tokens; the exemplars come in the Sampler's order (the choice: see the module
    docstring). Each section is rendered once with and once without code.
    """
    plain = [_section(policy, n, ex, False) for n, ex in enumerate(exemplars, 1)]
    # a failed exemplar never shows its code (below), so its coded rendering is its plain one
    coded = [_section(policy, n, ex, _shows_code(ex)) for n, ex in enumerate(exemplars, 1)]
    base = _prompt(policy, task, parent, guidance, [], [], [])  # the parent and job, rendered once

    def trial(count: int, code: set[int]) -> GeneratorPrompt:
        return replace(base, exemplars=tuple(coded[i] if i in code else plain[i] for i in range(count)),
                       exemplar_ids=tuple(e.id for e in exemplars[:count]),
                       code_ids=tuple(exemplars[i].id for i in sorted(code)))

    count = len(exemplars)
    best = trial(count, set())
    while count and best.tokens > budget:
        count -= 1
        best = trial(count, set())
    with_code: set[int] = set()
    for i in range(count):
        if not _shows_code(exemplars[i]):
            continue
        candidate = trial(count, with_code | {i})
        if candidate.tokens <= budget:
            with_code.add(i)
            best = candidate
    return best


def prompt_of(policy: SearchPolicy, task: Task, memory: RunMemory, state: WorkerState) -> GeneratorPrompt:
    """The prompt compose chose for ``state``'s iteration, rebuilt from the ids it kept.

    The ids are ``context_exemplar_ids`` and ``exemplar_code_ids``; the guidance is as the review left
    it.

    Raises:
        KeyError: the parent or an exemplar is not in the Evolve Buffer.
    """
    parent = memory.buffer.require(state.parent_id)
    exemplars = [memory.buffer.require(pid) for pid in state.context_exemplar_ids]
    code = set(state.exemplar_code_ids)
    sections = [_section(policy, n, ex, ex.id in code) for n, ex in enumerate(exemplars, 1)]
    return _prompt(policy, task, parent, state.guidance, exemplars, sections,
                   [e.id for e in exemplars if e.id in code])

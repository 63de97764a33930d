"""Phase 7, Summarize: z_c ~ M(· | Prompt_summary(z_p, c_c)) (paper Eq. 4).

The abstract covers what is new *and* what was inherited (``summary_variant="inherited"``);
``novel_only`` is the paper's ablated takeaway. With the Summarizer switched off the
"abstract" is the program's truncated source, as in the paper's ablation, so the other
agents see raw code. A reply the endpoint keeps garbling (unreadable, empty) after the
retries gets the same fallback as an empty one: a placeholder abstract; the run goes on.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.llm.calls import MalformedReply, call_role
from contextevolve.llm.parsing import clip_to_sentence, ends_sentence, sentences
from contextevolve.loop.behind import hand_over
from contextevolve.loop.resources import memory_of, task_of
from contextevolve.memory.records import ProgramRecord
from contextevolve.program.changes import changed_lines
from contextevolve.program.docstrings import without_docstrings
from contextevolve.prompts import summarizer as prompt
from contextevolve.roles import TokenUsage
from contextevolve.tasks.base import Task

RAW_ABSTRACT_CHARS = 1500
"""Characters of source used as the abstract when the Summarizer is ablated."""
ABSTRACT_CHARS = 800
"""Abstracts longer than this, or cut off at the Summarizer's token cap, end at their last full
sentence that fits."""
REASON_CHARS = 300
"""Characters of a failure reason kept in an abstract."""
IDEA_CHARS = 300
"""Characters of the guidance a failed child followed, kept in its abstract."""
EMPTY_ABSTRACT = "(the summarizer returned nothing)"
"""The abstract when the Summarizer gave no usable reply."""


def abstract_for(ctx: RunContext, task: Task, source: str, parent_abstract: str | None,
                 diagnostics: str = "", parent_source: str = "") -> tuple[str, TokenUsage]:
    """The abstract of ``source`` and the tokens it cost (``{}`` when no LLM call was made).

    The program's ``diagnostics`` are shown to the Summarizer only where the task asks
    (:attr:`Task.abstract_feedback`); with ``parent_source``, the lines ``source`` changed in it
    (:func:`~contextevolve.program.changes.changed_lines`) replace a "Changed:" sentence copied from the
    parent's abstract (:func:`with_measured_change`). The Summarizer is
    shown the program without its docstrings: they restate the task's contract, which every abstract would
    otherwise repeat, and they cost prompt tokens (the replay: docs/decisions/summarizer-abstracts.md).

    Raises:
        contextevolve.llm.faults.EndpointUnavailable: the summarizer's endpoint is down.
    """
    if not ctx.ablations.summarizer_enabled:
        return source[:RAW_ABSTRACT_CHARS], {}
    try:
        changes = changed_lines(parent_source, source) if parent_source else []
        messages = prompt.messages(task.title, without_docstrings(source), parent_abstract,
                                   ctx.ablations.summary_variant,
                                   diagnostics if task.abstract_feedback else "")
        reply = call_role("summarizer", messages, ctx)
    except MalformedReply as exc:
        return EMPTY_ABSTRACT, exc.usage
    abstract = finish_abstract(reply.text, parent_abstract, reply.truncated)
    return with_measured_change(abstract, parent_abstract, changes) or EMPTY_ABSTRACT, reply.usage


def finish_abstract(reply: str, parent_abstract: str | None, truncated: bool = False) -> str:
    """The abstract a Summarizer ``reply`` gives ("" for an empty one).

    The sentences the reply begins with that repeat the parent's abstract word for word are dropped,
    except those the prompt asks for by their first word ("Changed: nothing." repeated is news) unless a
    "Changed:" sentence of its own follows them (the reply copied the parent's whole abstract, then wrote
    the child's), and only when a whole sentence is left after them; then a reply longer than
    :data:`ABSTRACT_CHARS`, or cut off at the cap (``truncated``), ends at its last whole sentence
    (:func:`clip_to_sentence`). Why: docs/decisions/summarizer-abstracts.md.
    """
    said = sentences(reply)
    inherited = set(sentences(parent_abstract or ""))
    start = 0
    while start < len(said) and said[start] in inherited:
        start += 1
    if not any(s.startswith(prompt.FORM_WORDS[0]) for s in said[start:]):  # no change of its own follows
        start = 0
        while (start < len(said) and said[start] in inherited
               and not said[start].startswith(prompt.FORM_WORDS)):
            start += 1
    rest = said[start:]
    if truncated and rest and not ends_sentence(rest[-1]):
        rest = rest[:-1]
    if start and rest:
        reply = " ".join(said[start:])
    return clip_to_sentence(reply, ABSTRACT_CHARS, truncated=truncated)


def changed_sentence(abstract: str) -> str:
    """The first sentence of ``abstract`` that begins "Changed:" ("" when none does)."""
    return next((s for s in sentences(abstract) if s.startswith(prompt.FORM_WORDS[0])), "")


def with_measured_change(abstract: str, parent_abstract: str | None, lines: list[str]) -> str:
    """``abstract`` whose "Changed:" part, when it is the parent abstract's word for word, says ``lines``.

    A child's abstract whose "Changed:" sentence repeats its parent's describes the parent's change as the
    child's; that sentence, and the parent's sentences right after it up to "Kept:", give way to what the
    lines the child changed (:func:`~contextevolve.program.changes.changed_lines`) say it did, in
    :func:`~contextevolve.prompts.summarizer.measured_change`'s words. ``abstract`` unchanged when its
    "Changed:" sentence is its own, or there are no lines.
    """
    mine = changed_sentence(abstract)
    if not lines or not mine or mine != changed_sentence(parent_abstract or ""):
        return abstract
    said, inherited = sentences(abstract), set(sentences(parent_abstract or ""))
    start = said.index(mine)
    end = start + 1
    while end < len(said) and said[end] in inherited and not said[end].startswith(prompt.FORM_WORDS[1]):
        end += 1
    return " ".join([*said[:start], prompt.measured_change(lines), *said[end:]])


def failure_prefix(status: str) -> str:
    """How :func:`failure_abstract` begins, e.g. ``"FAILED (timeout): "``."""
    return f"FAILED ({status}): "


def failure_abstract(status: str, reason: str, guidance: str) -> str:
    """The abstract of a child that never ran to completion: its failure and the idea it tried."""
    idea = f" Idea it tried: {clip_to_sentence(guidance, IDEA_CHARS)}" if guidance else ""
    return f"{failure_prefix(status)}{reason[:REASON_CHARS]}.{idea}"


def no_effect_abstract(child: ProgramRecord, twin: ProgramRecord) -> str:
    """The abstract of a behavioural twin of ``twin``: its change had no effect, and the idea it tried."""
    idea = f" Idea it tried: {clip_to_sentence(child.guidance, IDEA_CHARS)}" if child.guidance else ""
    return f"NO EFFECT: the same results as {twin.id} (score {twin.combined_score:.6g}).{idea}"


def write_abstract(ctx: RunContext, child_id: str) -> TokenUsage:
    """Write z_c into the record of ``child_id``; returns the tokens the Summarizer spent.

    The tokens are ``{}`` when it was not asked. The Summarizer is called only for a valid child that is
    not a behavioural twin, and for an invalid one with ``search.summarize_invalid`` (the paper's
    Summarizer); a child that failed, timed out or (by default) was invalid gets :func:`failure_abstract`,
    a behavioural twin :func:`no_effect_abstract`, at no cost. With the Summarizer ablated every child
    that ran gets its raw source, as in the paper's ablation.
    """
    task, memory = task_of(ctx), memory_of(ctx)
    child = memory.buffer.require(child_id)
    usage: TokenUsage = {}
    ran = child.status in ("ok", "invalid") and bool(child.source)
    agent = ctx.ablations.summarizer_enabled  # ablated: every program that ran is its raw source
    if not ran or (agent and child.status == "invalid" and not ctx.search.summarize_invalid):
        abstract = failure_abstract(child.status, child.reason, child.guidance)
    elif agent and child.behavioural_twin_of:
        abstract = no_effect_abstract(child, memory.buffer.require(child.behavioural_twin_of))
    else:
        parent = memory.buffer.require(child.parent_id)
        abstract, usage = abstract_for(ctx, task, child.source, parent.abstract, child.diagnostics,
                                       parent.source)
    memory.buffer.update(child.id, abstract=abstract)
    return usage


def summarize(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
    """Phase 7: write z_c into the child's record (:func:`write_abstract`).

    With the Summarizer behind its worker (``RunContext.summarizes_behind``) the child is handed over
    instead: its abstract is written, and it is committed, while the worker goes on
    (:mod:`contextevolve.loop.behind`).
    """
    ctx = runtime.context
    if ctx.summarizes_behind:
        hand_over(ctx, state, write_abstract)
        return {}
    return {"iteration_usage": write_abstract(ctx, state.child_id)}

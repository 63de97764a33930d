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
from contextevolve.graph.state import LaneResult, LaneState
from contextevolve.llm.calls import MalformedReply, call_role
from contextevolve.memory.records import TokenUsage, add_usage
from contextevolve.nodes.resources import memory_of, task_of
from contextevolve.prompts import summarizer as prompt
from contextevolve.tasks.base import Task

RAW_ABSTRACT_CHARS = 1500
"""Characters of source used as the abstract when the Summarizer is ablated."""
ABSTRACT_CHARS = 1200
"""Abstracts longer than this are cut."""
EMPTY_ABSTRACT = "(the summarizer returned nothing)"
"""The abstract when the Summarizer gave no usable reply."""


def abstract_for(ctx: RunContext, task: Task, source: str, parent_abstract: str | None) -> tuple[str, TokenUsage]:
    """The abstract of ``source`` and the tokens it cost (``{}`` when no LLM call was made).

    Raises:
        contextevolve.llm.faults.EndpointUnavailable: the summarizer's endpoint is down.
    """
    if not ctx.summarizer_enabled:
        return source[:RAW_ABSTRACT_CHARS], {}
    try:
        reply = call_role("summarizer", prompt.messages(task.title, source, parent_abstract, ctx.summary_variant),
                          ctx)
    except MalformedReply as exc:
        return EMPTY_ABSTRACT, exc.usage
    text = " ".join(reply.text.split())[:ABSTRACT_CHARS]
    return text or EMPTY_ABSTRACT, reply.usage


def summarize(state: LaneState, runtime: Runtime[RunContext]) -> dict:
    """Write z_c into the child's record and report the lane's child to the buffer update."""
    ctx = runtime.context
    task, memory = task_of(ctx), memory_of(ctx)
    child = memory.buffer.require(state.child_id)
    usage: TokenUsage = {}
    if not child.source:  # nothing was generated: the failure itself is the abstract
        memory.buffer.update(child.id, abstract=f"Generation failed: {child.reason}")
    else:
        parent = memory.buffer.require(child.parent_id)
        abstract, usage = abstract_for(ctx, task, child.source, parent.abstract)
        memory.buffer.update(child.id, abstract=abstract)
    report = LaneResult(lane=state.lane, child_id=child.id, status=child.status, score=child.combined_score,
                        usage=add_usage(state.iteration_usage, usage))
    return {"iteration_usage": usage, "lane_results": [report]}

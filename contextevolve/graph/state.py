"""The graph state of one worker: identifiers, routing and token counts — never program facts.

A worker is a LangGraph thread of the run's graph that loops
``claim -> phases 1-7 (⇄ repair) -> update_buffer`` over the run's one Evolve Buffer; :class:`WorkerState` is
what its thread checkpoints. What a child *is* (source, status, score, reason, repairs, abstract) is owned by
its record in the buffer (:class:`~contextevolve.memory.records.ProgramRecord`); the state keeps the ids the
phases pass on, the routing flags and the iteration's tokens, seconds and LLM calls, so a checkpoint stays
small however long a run gets (docs/architecture.md, *The compiled graph*).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from contextevolve.roles import TokenUsage, add_usage
from contextevolve.timing import Seconds, add_seconds


def merge_usage(left: TokenUsage, right: TokenUsage) -> TokenUsage:
    """Reducer of ``iteration_usage``: sum role by role."""
    return add_usage(left, right)


def merge_seconds(left: Seconds, right: Seconds) -> Seconds:
    """Reducer of ``seconds``: sum key by key (:mod:`contextevolve.timing`)."""
    return add_seconds(left, right)


def append_calls(left: list[dict], right: list[dict]) -> list[dict]:
    """Reducer of ``llm_calls``: the iteration's LLM requests in the order they were made."""
    return [*(left or []), *(right or [])]


ITERATION_FIELDS = ("parent_id", "ask", "sibling_ids", "trajectory_ids", "guidance", "navigator_guidance",
                    "candidate_ids",
                    "exemplar_ids", "context_exemplar_ids", "exemplar_code_ids", "context_tokens",
                    "repair_step", "fix_pending", "repair_due",
                    "iteration_usage", "seconds", "llm_calls")
"""The fields of :class:`WorkerState` that belong to the iteration in progress: ``claim`` resets them."""


@dataclass
class WorkerState:
    """State of one worker (one LangGraph thread of a run)."""

    worker: int | None = None
    """This worker's index (0-based; ``evolve()`` names its thread ``worker-<index>``): seeds its LLM
    requests (:meth:`~contextevolve.graph.context.RunContext.worker_seed`). An input may ask for one; None
    takes the lowest free index (initialize binds it to the thread)."""
    run_identity: dict[str, str] = field(default_factory=dict)
    """The task and run directory this thread drives (set by initialize); every later node refuses
    run settings that name another (``ThreadMismatchError``), e.g. a thread resumed without its context."""
    initial_id: str | None = None
    """Program id of the initial program c_0 (the fallback parent)."""
    stop_reason: str | None = None
    """Why this worker stopped claiming iterations (a run-wide stop rule held); None while it goes on."""
    committed: int = 0
    """Children this worker has committed to the Evolve Buffer."""
    last_child_id: str | None = None
    """The last child this worker committed (its record, in the buffer, says how it did)."""
    written_guidance: str = ""
    """The Navigator's last guidance for this worker, reused while it has nothing new to say
    (:func:`contextevolve.nodes.navigate.guidance_is_current`)."""
    written_trajectory_ids: list[str] = field(default_factory=list)
    """The steps it was written from."""
    written_after: int = -1
    """Evaluated steps in the buffer when it was written (-1: none written yet)."""
    written_copies: int = 0
    """Copies of their parent (code twins) in the buffer when it was written: a copy since makes it stale."""
    written_parent_id: str = ""
    """The parent it was written for (the Navigator's prompt describes it)."""
    written_best_id: str = ""
    """The best program when it was written (a new best makes the Navigator be asked again)."""

    iteration: int = 0
    """The iteration in progress produces child ``iteration + 1`` (claimed from the buffer by ``claim``)."""
    child_id: str | None = None
    """Id of the child in progress (claimed before any LLM call, so a replayed node reuses it); once the
    worker stopped, of its last child, whose ids (parent, guidance, exemplars) the fields below still
    hold."""
    run_tokens: int = 0
    """Tokens the run had spent (over committed programs) when the iteration was claimed: with a token
    budget, the worker stops asking for more of its own model work once it has spent its share of what was
    left (:func:`~contextevolve.loop.stopping.worker_budget_spent`)."""
    workers: int = 1
    """Workers of the run when the iteration was claimed: the share above is split over them."""
    parent_id: str | None = None
    """c_p of the iteration (chosen by select_parent)."""
    ask: Literal["full", "sibling"] = "full"
    """How the child is asked for (set by claim): ``full``, the composed prompt Φ after the Navigator and
    the Sampler; ``sibling``, it is a reply to an earlier iteration's prompt, stored already: the iteration
    starts at evaluate."""
    sibling_ids: list[str] = field(default_factory=list)
    """Ids claimed for the prompt's other replies (``search.samples_per_prompt`` - 1 of them, fewer near the
    end of the budget): generate stores one child under each, and the worker's next claims evaluate them."""
    trajectory_ids: list[str] = field(default_factory=list)
    """Child ids of the parent->child steps shown to the Navigator (for the user: no phase reads it)."""
    guidance: str = ""
    """g: the Navigator's directional guidance (empty when ablated), as the review left it."""
    navigator_guidance: str | None = None
    """The Navigator's guidance when a person replaced it in review (``guidance`` is then theirs); None
    when nobody did."""
    candidate_ids: list[str] = field(default_factory=list)
    """Programs retrieved for the Sampler (relevance + diversity, failed ones included; for the user)."""
    exemplar_ids: list[str] = field(default_factory=list)
    """E_ctx: the k exemplars the Sampler chose for the Generator (written by sample only)."""
    context_exemplar_ids: list[str] = field(default_factory=list)
    """The exemplars that fit in the context budget, in the Sampler's order (written by compose; what
    the Generator sees and the child's record keeps)."""
    exemplar_code_ids: list[str] = field(default_factory=list)
    """Exemplars shown with their code (the others by their abstract; written by compose)."""
    context_tokens: int = 0
    """Estimated tokens of the Generator's prompt Φ (for the user: no phase reads it)."""
    repair_step: int = 0
    """Repair nodes this iteration's checkpoints have seen finish: a repair replayed after a crash finds
    attempt ``repair_step + 1`` already in the child's record and does not make it again (the record's
    ``attempts`` are the repairs themselves)."""
    fix_pending: bool = False
    """Routing: the last repair wrote a new version of the child, to be evaluated next."""
    repair_due: bool = False
    """Routing: the child failed with a repairable failure kind
    (:func:`~contextevolve.memory.records.repairable`) and a repair is left (set by evaluate and repair)."""
    iteration_usage: Annotated[TokenUsage, merge_usage] = field(default_factory=dict)
    """Tokens spent on the iteration in progress, by role."""
    seconds: Annotated[Seconds, merge_seconds] = field(default_factory=dict)
    """Wall seconds spent on the iteration in progress, by phase (:mod:`contextevolve.timing`)."""
    llm_calls: Annotated[list[dict], append_calls] = field(default_factory=list)
    """The iteration's LLM requests so far (:class:`contextevolve.timing.LLMCall` as dicts)."""

"""The graph state: identifiers, scores, guidance and short text — never whole programs.

Program source and the archive live in the memory layer (:mod:`contextevolve.memory`);
checkpoints therefore stay a few KB however long a run gets.

Two schemas: :class:`EvolveState` is the run's state (the outer loop); each *lane* — one
parent -> child pass of Algorithm 1's phases 1-7 — runs on its own :class:`LaneState`,
started by a LangGraph ``Send``. With ``lanes=1`` there is one lane per iteration: the
paper's sequential algorithm. A lane's phases are nodes of the run's graph, each handing the
updated LaneState to the next with a ``Send``; each also copies it into ``EvolveState.lanes``, so a
paused run shows what its lanes decided. Lanes report a :class:`LaneResult`; the buffer update joins them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Annotated

from langgraph.types import Overwrite
from typing_extensions import NotRequired, TypedDict

from contextevolve.roles import TokenUsage, add_usage
from contextevolve.timing import Seconds, add_seconds


def merge_usage(left: TokenUsage, right: TokenUsage) -> TokenUsage:
    """Reducer of ``iteration_usage``: sum role by role."""
    return add_usage(left, right)


def merge_seconds(left: Seconds, right: Seconds) -> Seconds:
    """Reducer of ``seconds``: sum key by key (:mod:`contextevolve.timing`)."""
    return add_seconds(left, right)


def append_calls(left: list[dict], right: list[dict]) -> list[dict]:
    """Reducer of ``llm_calls``: the lane's LLM requests in the order they were made."""
    return [*(left or []), *(right or [])]


class LaneResult(TypedDict):
    """What one lane hands to the buffer update."""

    lane: int
    """Lane index within its round (0-based)."""
    child_id: str
    """Id of the lane's child (from its iteration number)."""
    status: str
    """The child's evaluation status (ok | invalid | failed | timeout)."""
    score: float | None
    """The child's combined score."""
    usage: TokenUsage
    """Tokens the lane spent, by role."""
    reason: str
    """Why the child is not ok (empty when it is), for people."""
    failure_kind: NotRequired[str]
    """The child's :data:`~contextevolve.memory.records.FailureKind` (``""`` when ok); absent in older checkpoints."""
    repairs: int
    """Repair attempts made on the child."""
    parent_id: str
    """The lane's parent c_p."""
    guidance: str
    """The Navigator's guidance g the child followed (empty when ablated)."""
    exemplar_ids: list[str]
    """The exemplars the Generator saw."""
    seconds: NotRequired[Seconds]
    """Wall seconds the lane spent, by phase (:mod:`contextevolve.timing`); absent in older checkpoints."""
    llm_calls: NotRequired[list[dict]]
    """The lane's LLM requests (:class:`contextevolve.timing.LLMCall` as dicts); absent in older checkpoints."""


def merge_lanes(left: list[LaneResult], right: list[LaneResult]) -> list[LaneResult]:
    """Reducer of ``lane_results`` and ``lanes``: collect the lanes of a round (replacing a replayed
    lane). A node empties them with LangGraph's ``Overwrite([])``, which bypasses the reducer."""
    done = {r["lane"]: r for r in left}
    done.update({r["lane"]: r for r in right})
    return [done[k] for k in sorted(done)]


@dataclass
class EvolveState:
    """State of one ContextEvolve run (one LangGraph thread)."""

    iteration: int = 0
    """Iterations completed: children admitted to the Evolve Buffer (the initial program is iteration 0)."""
    initial_id: str | None = None
    """Program id of the initial program c_0."""
    initial_score: float | None = None
    """Combined score of c_0, recomputed by the evaluator."""
    initial_failure: str = ""
    """``"status: reason"`` when c_0 is not ``ok`` (a user's problem whose evaluator or program is broken:
    every child would start from a failed parent); empty when it is ok."""
    best_id: str | None = None
    """Id of the best ok program so far."""
    best_score: float | None = None
    """Its combined score."""
    lane_results: Annotated[list[LaneResult], merge_lanes] = field(default_factory=list)
    """Children of the current round, one per finished lane; emptied by the buffer update."""
    child_id: str | None = None
    """Id of the last child admitted (the highest of the last round)."""
    child_status: str | None = None
    """Its status."""
    child_score: float | None = None
    """Its combined score."""
    last_round: list[LaneResult] = field(default_factory=list)
    """The lanes of the last committed round, one :class:`LaneResult` each (parent, guidance, exemplar
    ids, child id, status, score, reason, repairs, tokens): what the last iteration(s) did, readable
    from the thread's state (:func:`contextevolve.api.thread_state`)."""
    total_usage: TokenUsage = field(default_factory=dict)
    """Tokens spent by the whole run, by role."""
    total_seconds: Seconds = field(default_factory=dict)
    """Wall seconds the whole run spent, by phase, summed over lanes (:mod:`contextevolve.timing`)."""
    elapsed_s: float = 0.0
    """Elapsed wall seconds of the run: the initial program's evaluation and abstract, then each round's
    slowest lane (time while the run was stopped does not count): what ``time_budget_s`` is checked against."""
    stop_reason: str | None = None
    """Why the loop stops (iteration budget, target score, token budget); None while it goes on."""
    run_identity: dict[str, str] = field(default_factory=dict)
    """The task and run directory this thread drives (set by initialize); every later node refuses
    run settings that name another (``ThreadMismatchError``), e.g. a thread resumed without its context."""
    round_size: int = 0
    """Lanes of the round in progress (or the next): min(``RunContext.parallelism.lanes``, iterations left), set by
    initialize and the buffer update. The buffer update commits the round once this many lanes reported."""
    lanes: Annotated[list[dict], merge_lanes] = field(default_factory=list)
    """The lanes of the round in progress, one dict each: the lane's :class:`LaneState` fields as its
    last finished phase left them (parent, guidance, exemplar ids, child id and status, repairs,
    tokens) plus ``phase``, the name of that phase. Readable while a run is paused before a phase
    (e.g. the guidance before ``generate``); emptied when the round is committed."""


@dataclass
class LaneState:
    """State of one lane: one parent -> child pass through phases 1-7."""

    iteration: int = 0
    """Iterations completed before this lane's child: the child is iteration ``iteration + 1``."""
    lane: int = 0
    """Lane index within its round (0-based)."""
    initial_id: str | None = None
    """Program id of c_0 (the fallback parent)."""
    run_identity: dict[str, str] = field(default_factory=dict)
    """The run's task and run directory (from :class:`EvolveState`), checked by each phase."""
    run_tokens: int = 0
    """Tokens the run had spent when this lane's round was dispatched (``EvolveState.total_usage``
    summed): with a token budget, a lane stops asking for more of its own model work once it has spent
    its share of what was left (:func:`~contextevolve.nodes.stopping.lane_budget_spent`)."""
    round_lanes: int = 0
    """Lanes of this lane's round, as dispatched (``EvolveState.round_size``): the share above is split over
    them, not over the lanes a resumed run's settings name now. 0 in a checkpoint written before the field
    existed (the share then falls back to the current settings)."""
    parent_id: str | None = None
    """c_p of this lane (chosen by select_parent)."""
    trajectory_ids: list[str] = field(default_factory=list)
    """Child ids of the parent->child steps shown to the Navigator (for the user: no phase reads it)."""
    guidance: str = ""
    """g: the Navigator's directional guidance (empty when ablated)."""
    candidate_ids: list[str] = field(default_factory=list)
    """Programs retrieved for the Sampler (relevance + diversity, failed ones included; for the user:
    no phase reads it)."""
    exemplar_ids: list[str] = field(default_factory=list)
    """E_ctx: the k exemplars the Sampler chose for the Generator (written by sample only)."""
    context_exemplar_ids: list[str] = field(default_factory=list)
    """The exemplars that fit in the context budget, in the Sampler's order (written by compose; what
    the Generator sees and the child's record keeps)."""
    exemplar_code_ids: list[str] = field(default_factory=list)
    """Exemplars whose code fits in the context budget (the others are shown as abstracts; written by compose)."""
    context_tokens: int = 0
    """Estimated tokens of the composed generator context Φ (for the user: no phase reads it)."""
    child_id: str | None = None
    """Id of this lane's child (deterministic from its iteration number)."""
    child_status: str | None = None
    """pending | ok | invalid | failed | timeout."""
    child_score: float | None = None
    """The child's combined score once evaluated."""
    repairs: int = 0
    """Repair attempts made on this lane's child so far: at most ``RunContext.search.repair_attempts`` by the
    model plus :data:`~contextevolve.nodes.repair.IMPORT_FIXES` added imports."""
    repair_due: bool = False
    """Set by evaluate and repair (generate leaves it to evaluate, always next): the child failed with a
    repairable failure kind (:func:`~contextevolve.memory.records.repairable`) and attempts are left."""
    iteration_usage: Annotated[TokenUsage, merge_usage] = field(default_factory=dict)
    """Tokens spent in this lane, by role."""
    seconds: Annotated[Seconds, merge_seconds] = field(default_factory=dict)
    """Wall seconds spent in this lane, by phase (added by the phase wrapper, :mod:`contextevolve.timing`)."""
    llm_calls: Annotated[list[dict], append_calls] = field(default_factory=list)
    """This lane's LLM requests so far (:class:`contextevolve.timing.LLMCall` as dicts)."""
    lane_results: Annotated[list[LaneResult], merge_lanes] = field(default_factory=list)
    """The lane's report (set by its last phase, summarize), handed to the run's state for the buffer update."""


def lane_from(payload: dict) -> LaneState:
    """The :class:`LaneState` a ``Send`` delivered as a plain dict. Keys that are no longer fields
    (e.g. ``parent_score``, in checkpoints written before it was removed) are dropped, so a run
    checkpointed mid-round by an older version resumes."""
    names = {f.name for f in fields(LaneState)}
    return LaneState(**{key: value for key, value in payload.items() if key in names})


REDUCERS = {"iteration_usage": merge_usage, "lane_results": merge_lanes, "lanes": merge_lanes,
            "seconds": merge_seconds, "llm_calls": append_calls}
"""The reducer of every state key that has one (the same in both schemas)."""


def apply_update(state, update: dict):
    """``state`` (an :class:`EvolveState` or :class:`LaneState`) with a node's ``update`` applied as
    LangGraph applies it: keys with a reducer (:data:`REDUCERS`) merged, the others replaced, and an
    ``Overwrite(value)`` replacing whatever the key's reducer.

    Raises:
        TypeError: ``update`` names a key the state does not have.
    """
    merged = {key: value.value if isinstance(value, Overwrite)
              else REDUCERS[key](getattr(state, key), value) if key in REDUCERS else value
              for key, value in update.items()}
    return replace(state, **merged)

"""Records kept in the Evolve Buffer (token bookkeeping lives in :mod:`contextevolve.roles`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from contextevolve.roles import TokenUsage
from contextevolve.timing import LLMCall, Seconds

ProgramStatus = Literal["pending", "ok", "invalid", "failed", "timeout"]

FailureKind = Literal["", "endpoint", "edit", "twin", "compile", "precheck", "runtime", "invalid", "timeout",
                      "evaluator"]
"""Why a program is not ``ok``, set where the failure is known (``""`` while it is ok or pending).

``endpoint``: the LLM's reply stayed unusable (not the program's fault); ``edit``: the reply did not
become a program (no code block, an edit that does not apply); ``twin``: the same normalised code as its
parent or a buffered program (not evaluated); ``compile``: it does not compile; ``precheck``: it fails
another pre-check (entry function, signature, smoke run); ``runtime``: the full evaluation failed (raised,
died, every case failed); ``invalid``: its output broke the task's contract (also when the grader cannot
read it); ``timeout``: it ran past the limits; ``evaluator``: our side failed (sandbox host, executor,
Ray). Code decides by this kind, never by ``reason`` (docs/decisions/failure-kinds.md)."""

NOT_REPAIRABLE: frozenset[str] = frozenset({"endpoint", "twin", "timeout"})
"""Failure kinds a repair is never tried on: not the program's fault (``endpoint``), nothing to fix
(``twin``), or too dear to find out (``timeout``: a fix would cost another full timeout)."""


def repairable(kind: FailureKind) -> bool:
    """True when a program that failed with ``kind`` may be fixed by a repair."""
    return bool(kind) and kind not in NOT_REPAIRABLE


def kind_of_status(status: str) -> FailureKind:
    """The kind a verdict implies when nothing more specific is known.

    ``failed`` → ``runtime``, ``invalid`` → ``invalid``, ``timeout`` → ``timeout``, anything else → ``""``.
    """
    return {"failed": "runtime", "invalid": "invalid",  # type: ignore[return-value]
            "timeout": "timeout"}.get(status, "")


_LEGACY_PREFIXES: tuple[tuple[str, FailureKind], ...] = (
    ("endpoint fault", "endpoint"), ("duplicate of", "twin"), ("pre-check: SyntaxError", "compile"),
    ("pre-check: the program does not compile", "compile"), ("pre-check: ", "precheck"),
    ("malformed generator output", "edit"), ("a restart's second ask could not be applied", "edit"),
    ("evaluation error", "evaluator"), ("evaluation on the Ray cluster failed", "evaluator"))


def legacy_failure_kind(status: str, reason: str) -> FailureKind:
    """The kind of a record stored before records carried one, read once from its reason text.

    The only place a failure is classified by its text: run directories written by earlier versions
    still load, and everything written since carries its kind.
    """
    if status in ("ok", "pending"):
        return ""
    for prefix, kind in _LEGACY_PREFIXES:
        if reason.startswith(prefix):
            return kind
    if reason.startswith("repair ") and "could not be applied" in reason:
        return "edit"
    return kind_of_status(status)


def _with_legacy_kind(data: object) -> object:
    """A ``mode="before"`` validator body: fill ``failure_kind`` of a record stored without one."""
    if isinstance(data, dict) and "failure_kind" not in data:
        data = {**data, "failure_kind": legacy_failure_kind(str(data.get("status", "")),
                                                            str(data.get("reason", "")))}
    return data


def program_id(iteration: int) -> str:
    """Deterministic id of the program produced by ``iteration`` (0 = the initial program).

    Derived from the iteration so that replaying an iteration after a crash overwrites
    its record instead of adding a second one.
    """
    return f"it{iteration:05d}"


def iteration_of(program: str) -> int:
    """The iteration that produced the program with id ``program`` (the inverse of :func:`program_id`).

    Raises:
        ValueError: ``program`` is no program id.
    """
    if not program.startswith("it") or not program[2:].isdigit():
        raise ValueError(f"{program!r} is not a program id (it<iteration>)")
    return int(program[2:])


class RepairAttempt(BaseModel):
    """One failed version of a child and how the next version was made from it."""

    attempt: int
    """1 for the first repair, 2 for the second, ..."""
    method: Literal["model", "import", "restart", "no_effect"] = "model"
    """How the next version was made: the missing import was added without a model (``import``), or the
    Generator was asked again because this version changed no result (``no_effect``: a behavioural twin).
    Older runs also stored their model repairs, deleted since (docs/decisions/repair-restart.md): the
    model fixed this version (``model``, the default of records that name none) or wrote the child again
    from its parent (``restart``)."""
    status: ProgramStatus
    """How the version being repaired ended (failed | invalid | timeout; ok for a behavioural twin)."""
    reason: str
    """The evaluator's (or the editor's) reason for that failure, for people and the LLM."""
    failure_kind: FailureKind = ""
    """That failure's :data:`FailureKind` (older records: read from ``reason`` on load)."""
    source: str = ""
    """The failing version (empty when the Generator's reply never became a program)."""
    tokens: TokenUsage = Field(default_factory=dict)
    """Tokens the repair call cost (under ``repair``)."""

    _legacy = model_validator(mode="before")(_with_legacy_kind)


class ProgramRecord(BaseModel):
    """One program in the Evolve Buffer: c (source), z (abstract), s (scores) and lineage.

    Non-finite numbers survive a JSON round trip as the strings ``"NaN"`` / ``"Infinity"``.
    """

    model_config = ConfigDict(ser_json_inf_nan="strings")

    id: str
    iteration: int
    """Iteration that produced it; 0 for the initial program."""
    parent_id: str | None = None
    source: str = ""
    abstract: str = ""
    """Summarizer's abstract z: what is new and what was inherited."""
    metrics: dict[str, float] = Field(default_factory=dict)
    combined_score: float = 0.0
    outputs_digest: str = ""
    """SHA-256 of what the program returned to the harness, every call's value in order (computed on our
    side; ``""`` when the task has none or the program did not run)."""
    behavioural_twin_of: str = ""
    """Id of a stored program whose results this valid program's equal (the same outputs, or every metric
    equal to the bit): a *behavioural twin*, whose change had no effect. ``""``: it behaves as nothing
    stored did."""
    status: ProgramStatus = "pending"
    reason: str = ""
    """Why the status is not ok (evaluation failure or malformed LLM output), for people and the LLM."""
    failure_kind: FailureKind = ""
    """The :data:`FailureKind` of that failure; ``""`` while ok or pending (older records: read from
    ``reason`` on load)."""
    diagnostics: str = ""
    traceback: str = ""
    """Where a failed program failed: frames of its own file and the exception (shown to repair)."""
    guidance: str = ""
    """Navigator guidance g the child was generated under (a person's, when one replaced it)."""
    navigator_guidance: str | None = None
    """The Navigator's guidance when a person replaced it in review (``""``: it had none); None when nobody
    did."""
    exemplar_ids: list[str] = Field(default_factory=list)
    """Programs shown to the Generator as exemplars (those the Sampler chose that the prompt kept)."""
    candidate_ids: list[str] = Field(default_factory=list)
    """Programs retrieval offered the Sampler to choose the exemplars from, in retrieval order."""
    sibling_of: str = ""
    """The first child of the composed prompt this child was one reply of (``search.samples_per_prompt``
    above 1), whose parent, guidance and exemplars it shares; ``""`` for that first child, and for a child
    whose prompt was asked for one reply."""
    mutation: str = ""
    """The concrete change the last ask after a twin named for this child (a second ask after a code twin, or
    the ask after a behavioural twin; ``""``: none named one), whether or not its reply became the child."""
    trajectory_ids: list[str] = Field(default_factory=list)
    """Children of the parent → child steps the Navigator read for the guidance."""
    tokens: TokenUsage = Field(default_factory=dict)
    """Tokens spent producing this program, by role."""
    eval_seconds: float = 0.0
    """Seconds the sandbox took for this child's evaluations (pre-check smoke runs and full ones, every
    version)."""
    seconds: Seconds = Field(default_factory=dict)
    """Wall seconds spent producing this program, by phase (:mod:`contextevolve.timing`)."""
    llm_calls: list[LLMCall] = Field(default_factory=list)
    """The LLM requests made for this program, in order: role, phase, tokens, seconds."""
    attempts: list[RepairAttempt] = Field(default_factory=list)
    """Failed versions of this child, each handed to the Generator for repair, in order (empty when
    the first version was kept)."""
    prechecks_failed: int = 0
    """Versions stopped by a pre-check (compile, signature, smoke run) instead of a full evaluation."""
    committed: bool = False
    """True once ``update_buffer`` has admitted it; pending records are work in progress."""
    worker: int = 0
    """The worker that produced it (0 for the initial program)."""

    _legacy = model_validator(mode="before")(_with_legacy_kind)

    @model_validator(mode="after")
    def _no_kind_unless_failed(self) -> ProgramRecord:
        if self.status in ("ok", "pending"):
            self.failure_kind = ""
        if self.status != "ok":
            self.behavioural_twin_of = ""
        return self

    @property
    def repairs(self) -> list[RepairAttempt]:
        """The attempts that repaired a failure (every attempt but the asks after no effect)."""
        return [a for a in self.attempts if a.method != "no_effect"]

    @property
    def asked_after_no_effect(self) -> bool:
        """Whether the Generator was asked again after a version of this child changed no result."""
        return any(a.method == "no_effect" for a in self.attempts)

    @property
    def useful(self) -> bool:
        """Valid and a behaviour of its own: ``ok`` and not a behavioural twin."""
        return self.status == "ok" and not self.behavioural_twin_of

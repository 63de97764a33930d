"""The comparison's records: its settings and one system's result on one seed (``results.json``).

They are kept apart from the code that makes them (:mod:`contextevolve.compare.runner`) and the code
that shows them (:mod:`contextevolve.compare.results`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field


class CompareSettings(BaseModel):
    """One comparison's settings (the ``compare`` command's options)."""

    task: str
    """Registered task name (``problem:<folder>`` for a user's staged problem)."""
    problem_digest: str | None = None
    """A user's problem's digest (:func:`problem_digest`), kept in ``results.json`` so a copied folder is
    still known to hold this problem; None for a built-in task (filled in when results are written)."""
    systems: list[str] = Field(default_factory=lambda: ["contextevolve", "openevolve", "gepa"])
    """Systems to run, in order (:data:`contextevolve.compare.runner.SYSTEMS`)."""
    candidates: int = 8
    """Candidate budget per system and seed (iterations / proposals)."""
    seeds: list[int] = Field(default_factory=lambda: [0])
    """Seeds; each system runs once per seed."""
    out: str
    """Output folder."""
    base_url: str | None = None
    """OpenAI-compatible endpoint; None = the embedded model (started once for all systems)."""
    api_key: str | None = Field(default=None, repr=False)
    """Key for ``base_url`` (never written to results)."""
    model: str | None = None
    """Model name; None = the embedded model's alias."""
    temperature: float = 0.8
    """Sampling temperature of every code-writing request (ContextEvolve's Generator, the peers)."""
    top_p: float | None = None
    """Set on every request by the proxy; None = 0.8 on the embedded model, else the endpoint's."""
    top_k: int | None = None
    """Set on every request by the proxy; None = 20 on the embedded model, else the endpoint's."""
    max_tokens: int = 1400
    """Completion-token cap of every code-writing request."""
    token_budget: int | None = None
    """Same-token-budget mode: tokens each system may use per seed (None: candidate budget only)."""
    cost_budget: float | None = None
    """Same-cost budget mode: US dollars each system may spend per seed at ``prices`` (None: none); the
    comparison's model needs a price. A peer is stopped when its requests' cost reaches it, ContextEvolve
    stops by its own cost budget."""
    prices: dict[str, dict[str, float]] = Field(default_factory=dict)
    """Dollars per million prompt and completion tokens per model (``{"input", "output"}``): each run's
    cost is shown when its model has one."""
    timeout_s: float | None = None
    """Wall-clock limit of one system run, seconds (None: none); a peer past it is stopped."""
    time_budget_s: float | None = None
    """Same-time budget mode: wall seconds each system may use per seed (None: none).

    ContextEvolve stops by its own time budget (``RunContext.time_budget_s``), checked when a worker
    claims an iteration; a peer is stopped once its process has run this long."""
    contextevolve_settings: dict[str, Any] = Field(default_factory=dict)
    """Run settings (flat names, as ``evolve()`` takes them) of every ContextEvolve system in the comparison,
    its ablations included, that differ from ContextEvolve's defaults (``compare --contextevolve-args``);
    empty: the defaults. The ones the comparison sets itself (seed, endpoint, model, temperature, budgets)
    are refused (:data:`contextevolve.compare.own_run.SET_BY_COMPARE`)."""
    variant: str = ""
    """A name for this comparison's ContextEvolve settings: its ContextEvolve systems run and are shown as
    ``<system>+<variant>`` (label ``contextevolve+tournament-s0``), so that rows of several settings, the
    defaults' included, sit side by side in one ``out`` and one table; the peers keep their names. Empty:
    their own names (:func:`contextevolve.compare.own_run.run_name`)."""
    log_prompts: bool = False
    """Keep every prompt and reply of the ContextEvolve systems in their run folders
    (``<label>/run/prompts.jsonl``, as ``run --log-prompts``), for replays such as ``benchmarks/sampling.py``.
    The peers' requests are not kept; the proxy's ``requests.jsonl`` counts them either way."""

    @property
    def priced_model(self) -> str:
        """The model every system calls, as ``prices`` names it.

        ``model`` (``default`` when an endpoint is given without one), the embedded model's alias without
        an endpoint.
        """
        if self.base_url:
            return self.model or "default"
        from contextevolve.llm.embedded import MODEL_ALIAS

        return MODEL_ALIAS


class SystemResult(BaseModel):
    """One system on one seed, all figures from the ledger and the proxy."""

    system: str
    seed: int
    label: str
    initial: float | None = None
    """The initial program's combined score (our evaluator)."""
    best: float | None = None
    """The best valid candidate's combined score (the initial's when none beat it)."""
    best_recomputed: float | None = None
    """The best program evaluated once more after the run."""
    budget: int | None = None
    """The candidate budget it ran under (OpenEvolve iterations, GEPA proposals, ContextEvolve iterations)."""
    candidates: int = 0
    """Candidates evaluated (ledger entries that are proposals): fewer than the budget when a
    proposal never became a program (an OpenEvolve diff that did not apply, a GEPA proposal its
    cache already knew)."""
    valid: int = 0
    """Candidates our evaluator scored ``ok``."""
    valid_changed: int = 0
    """Valid candidates whose normalised code is new (not a copy up to comments/docstrings)."""
    valid_new_score: int | None = None
    """Valid candidates whose score no earlier valid program of the run had (the initial one included): the
    ones that computed something new, as a score can tell. None in results written before it was counted."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens: int = 0
    """Prompt + completion tokens counted by the proxy."""
    llm_calls: int = 0
    """Requests counted by the proxy."""
    cost: float | None = None
    """Dollars of those tokens at the comparison's price of the model (None: it has none)."""
    own_tokens: int | None = None
    """The system's own token report (ContextEvolve's run), to check against the proxy."""
    wall_s: float = 0.0
    """Wall seconds of the system's run (not counting the post-run recomputation)."""
    best_so_far: list[float | None] = Field(default_factory=list)
    """Best score after each candidate (paper Fig. 3a)."""
    cumulative_tokens: list[int] = Field(default_factory=list)
    """Tokens used by the time each candidate's evaluation finished (Fig. 3b): from the proxy's
    records for the peers, from the children's own token records for ContextEvolve (equal in sum)."""
    cumulative_prompt_tokens: list[int] = Field(default_factory=list)
    """The prompt tokens among :attr:`cumulative_tokens` (the rest are completion tokens), candidate by
    candidate: what each had cost by then at a price (empty in results written before it was kept)."""
    stopped: str = ""
    """Why the run ended early (token budget, time limit, error), empty when it finished."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """The run settings a ContextEvolve run changed from its defaults
    (:attr:`CompareSettings.contextevolve_settings`; an ablation's switched-off agent is its system, not a
    setting here); empty for a peer and for the defaults."""


def problem_digest(task: str) -> str | None:
    """The digest of a user's staged problem (``problem:<folder>``: its files and settings), else None.

    A staged problem is named by its folder's absolute path, which differs between copies of a
    comparison's folder; its digest does not, so earlier results are matched by it.
    """
    from pydantic import ValidationError

    from contextevolve.tasks.problem.source import PREFIX, SPEC_FILE, ProblemSpec

    if not task.startswith(PREFIX):
        return None
    try:
        spec = ProblemSpec.model_validate_json((Path(task.removeprefix(PREFIX)) / SPEC_FILE).read_text())
        return spec.digest or None
    except (OSError, ValidationError):
        return None


def task_in(out: Path, task: str, digest: str | None) -> str:
    """``task``, or for a user's problem ``out``'s own staged copy when it holds that problem (``digest``).

    A comparison's folder copied elsewhere names the problem staged where it was first run, which may be
    gone.
    """
    from contextevolve.tasks.problem.source import staged_task

    local = staged_task(task, out)
    return local if local != task and digest and problem_digest(local) == digest else task


def earlier_results(out: Path, task: str) -> list[SystemResult]:
    """The results already in ``out/results.json`` (a comparison extended by more systems or seeds).

    A built-in task must have the same name; a user's problem the same digest (:func:`problem_digest`),
    wherever it was staged, so a comparison's folder can be copied and extended.

    Raises:
        ValueError: they belong to another task or another version of the problem.
    """
    path = Path(out) / "results.json"
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    settings = data.get("settings", {})
    stored = settings.get("task")
    if stored != task:
        digest = problem_digest(task)
        if digest is None or (settings.get("problem_digest") or problem_digest(stored or "")) != digest:
            raise ValueError(f"{out} holds a comparison on {stored!r}, not {task!r}"
                             + (" (another problem, or another version of its files)" if digest else ""))
    return [SystemResult.model_validate(r) for r in data.get("results", [])]

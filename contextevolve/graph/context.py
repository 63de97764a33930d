"""Typed run settings (LangGraph ``context_schema``): everything a run is configured by.

Nodes read these through ``runtime.context``; they are not checkpointed, so the CLI
saves them to ``RUN_DIR/run.json`` (secrets excluded) for ``--resume``. Unknown setting
names are refused everywhere a ``RunContext`` is built (keywords, ``from_json``, the
context dict of a ``langgraph dev`` run) with :class:`UnknownSettingError`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from contextevolve.evaluation.limits import SandboxLimits
from contextevolve.roles import ROLES, Role

DEFAULT_TASK = "model_placement"
"""The task of a run that names none (and of a run directory whose run.json does not say)."""
SANDBOX_DEFAULTS = SandboxLimits()
"""The sandbox's default limits: the ``eval_*`` fields below take theirs from here (one place)."""
#: Default upper bound on completion tokens per role (the embedded model decodes ~36 tok/s).
DEFAULT_MAX_TOKENS: dict[str, int] = {"summarizer": 200, "navigator": 160, "sampler": 80, "generator": 1400}
#: Default sampling temperature per role: creative generator, steady context agents.
DEFAULT_TEMPERATURES: dict[str, float] = {"summarizer": 0.2, "navigator": 0.7, "sampler": 0.2, "generator": 0.8}


class UnknownSettingError(ValueError, TypeError):
    """Run settings name a field :class:`RunContext` does not have (a ``ValueError`` for the API
    and CLI, and a ``TypeError`` like any unexpected keyword argument)."""


def check_setting_names(names: Iterable[str]) -> None:
    """Refuse names that are not :class:`RunContext` fields, suggesting the nearest valid one.

    Raises:
        UnknownSettingError: e.g. ``unknown run setting 'max_retry' (did you mean 'max_retries'?)``.
    """
    known = setting_names()
    unknown = sorted(set(names) - known)
    if not unknown:
        return
    parts = []
    for name in unknown:
        near = difflib.get_close_matches(name, sorted(known), n=1)
        parts.append(f"{name!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
    raise UnknownSettingError(f"unknown run setting{'s' if len(unknown) > 1 else ''} {', '.join(parts)}; "
                              "the settings are the fields of contextevolve.graph.context.RunContext")


def setting_names() -> set[str]:
    """Names of all :class:`RunContext` fields."""
    return {f.name for f in fields(RunContext)}


@dataclass(kw_only=True)
class RunContext:
    """Settings of one evolution run. All fields have defaults; see the README for the CLI flags.

    Flat on purpose: the field names are the keywords of ``evolve()``, the keys of ``run.json`` and
    of a ``langgraph dev`` context, and map one to one onto CLI flags (``cli.run_settings``); the
    groups below (stop conditions, models, search, parallelism, ablations, memory, sandbox,
    observation) are sections of the class, and the sandbox group is also one
    :class:`SandboxLimits` (:meth:`sandbox_limits`).

    Raises (on construction):
        UnknownSettingError: an unknown keyword (checked in ``__new__``, before the dataclass ``__init__``).
        ValueError: a value out of range (``__post_init__``).
    """

    task: str = DEFAULT_TASK
    """Registered task name (``contextevolve tasks`` lists them)."""
    run_dir: str = "runs/default"
    """Directory holding the Evolve Buffer, the Chroma index, checkpoints and run.json."""

    # --- stop conditions -------------------------------------------------------------------
    max_iterations: int = 10
    """Stop once this many iterations (children) have been completed in the run."""
    target_score: float | None = None
    """Stop once the best combined score reaches this (in the task's orientation)."""
    token_budget: int | None = None
    """Stop once prompt + completion tokens over all roles reach this."""

    # --- models ----------------------------------------------------------------------------
    base_url: str | None = None
    """OpenAI-compatible endpoint for every role; ``None`` = environment, else the embedded LLM."""
    api_key: str | None = field(default=None, repr=False)
    """API key for ``base_url``; ``None`` = environment. Never written to run.json."""
    model: str | None = None
    """Model name for every role without its own entry in ``models``."""
    models: dict[str, str] = field(default_factory=dict)
    """Model per role, e.g. ``{"generator": "qwen2.5-coder-32b"}``."""
    temperatures: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TEMPERATURES))
    """Sampling temperature per role."""
    max_tokens: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_MAX_TOKENS))
    """Completion-token cap per role."""
    request_timeout_s: float = 600.0
    """Timeout of one LLM request, seconds."""
    max_retries: int = 4
    """Retries of an LLM request on connection, rate-limit and 5xx errors and on malformed replies
    (non-JSON body, no choices, empty or truncated completion)."""
    retry_wait_s: float = 1.0
    """First backoff wait between retries, seconds; it doubles per retry (up to 60 s) plus up to
    ``retry_wait_s`` of random jitter."""

    # --- the search: agents, context, repair -------------------------------------------------
    parent_selection: Literal["tournament", "best", "random"] = "tournament"
    """How select_parent picks c_p among ok programs."""
    tournament_size: int = 3
    """Entrants of a tournament, drawn uniformly from the ok programs (``parent_selection="tournament"``)."""
    num_trajectories: int = 4
    """m: parent->child steps shown to the Navigator."""
    category_weights: dict[str, float] = field(
        default_factory=lambda: {"improvement": 0.5, "mixed": 0.3, "decline": 0.2})
    """p(Δs): sampling weight of each trajectory category."""
    num_exemplars: int = 2
    """k: exemplars the Sampler hands to the Generator."""
    candidate_pool: int = 6
    """Candidates retrieved (MMR) for the Sampler agent to choose from."""
    failed_candidates: int = 2
    """Of those, how many slots are reserved for failed/invalid programs."""
    context_token_budget: int = 3500
    """Token budget of the composed generator context Φ (parent code included)."""
    generation_mode: Literal["full", "diff"] = "full"
    """Generator writes a whole program, or SEARCH/REPLACE diffs against the parent. ``full`` by
    evidence: with the embedded model it made twice the valid children per iteration (README,
    "Every attempt counts")."""
    repair_attempts: int = 2
    """R: times a failed child (error, invalid output, a diff that does not apply) goes back to the
    Generator with its error and traceback for a minimal fix; 0 = the paper's algorithm (no repair)."""
    repair_restart: bool = True
    """With ``repair_attempts >= 2``, the last repair writes the child again from its parent, told the
    error the failed version met, instead of fixing the failing program (issue 10; False: every
    repair is a fix)."""
    prechecks: bool = True
    """Check that a child compiles, has the entry function's signature and survives a smoke run on one
    small case before its full evaluation (a failure goes straight to repair)."""

    # --- parallelism -----------------------------------------------------------------------------
    lanes: int = 1
    """Children produced in parallel per round, each lane with its own parent, guidance and
    exemplars; 1 = the paper's sequential algorithm."""
    eval_workers: int = 1
    """Evaluations running at once (local processes, or Ray tasks in flight)."""
    executor: Literal["local", "ray"] = "local"
    """Where evaluations run: sandboxed processes on this machine, or Ray tasks on a cluster."""
    ray_address: str | None = None
    """Ray cluster address for ``executor="ray"`` (``HOST:PORT``, ``ray://...``, ``auto``);
    ``None`` starts a local Ray instance."""

    # --- ablations and the paper's takeaway variants -----------------------------------------------
    summarizer_enabled: bool = True
    """False: no Summarizer; a program's 'abstract' is its truncated source."""
    navigator_enabled: bool = True
    """False: no Navigator; the Generator gets no guidance."""
    sampler_enabled: bool = True
    """False: no Sampler agent; exemplars are the k best-scoring programs."""
    summary_variant: Literal["inherited", "novel_only"] = "inherited"
    """``novel_only``: the Summarizer describes only what is new (paper takeaway a, -12.6%)."""
    guidance_variant: Literal["directional", "implementation"] = "directional"
    """``implementation``: the Navigator prescribes concrete steps (takeaway b, -32.7%)."""
    sampling_variant: Literal["informative", "top_score"] = "informative"
    """``top_score``: candidates are only the highest-scoring programs (takeaway c, -27.8%)."""

    # --- memory -----------------------------------------------------------------------------
    chroma_url: str | None = None
    """``http://host:port`` of a Chroma server; ``None`` = PersistentClient in run_dir."""

    # --- sandbox (defaults: SANDBOX_DEFAULTS, evaluation/limits.py) ------------------------------
    eval_timeout_s: float | None = None
    """Wall-clock limit of one evaluation; ``None`` = the task's default."""
    eval_cpu_s: float | None = None
    """CPU-time limit per candidate process, seconds; ``None`` = the wall-clock limit."""
    eval_memory_mb: int = SANDBOX_DEFAULTS.memory_mb
    """Memory cap of a candidate (per process; per tree where a memory cgroup exists), MiB."""
    eval_max_processes: int = SANDBOX_DEFAULTS.max_processes
    """Processes + threads a candidate's tree may hold at once."""
    eval_output_kb: int = SANDBOX_DEFAULTS.output_kb
    """Cap on a candidate's stdout and on its stderr, KiB."""
    eval_files_mb: int = SANDBOX_DEFAULTS.files_mb
    """Cap on any file and on all files a candidate writes, MiB."""
    eval_allow_network: bool = SANDBOX_DEFAULTS.allow_network
    """Let candidates use the network (off: new network namespace + Landlock TCP rules)."""

    # --- reproducibility and observation ---------------------------------------------------------
    seed: int = 0
    """Seeds parent selection and trajectory sampling (per iteration, so resume is reproducible)."""
    log_prompts: bool = False
    """Keep every prompt and reply in ``run_dir/prompts.jsonl`` (:mod:`contextevolve.llm.transcript`)."""
    review_guidance: bool = False
    """Human in the loop: every lane pauses before ``generate`` with a LangGraph ``interrupt``
    showing its guidance; resume with ``Command(resume=text)`` to replace the guidance (an empty
    text or None keeps it). Needs a checkpointer (``langgraph dev`` or ``build_graph(saver)``)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> RunContext:
        check_setting_names(kwargs)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        problems = []
        if self.max_iterations < 0:
            problems.append("max_iterations must be >= 0")
        if self.max_retries < 0 or self.retry_wait_s < 0:
            problems.append("max_retries and retry_wait_s must be >= 0")
        if self.repair_attempts < 0:
            problems.append("repair_attempts must be >= 0")
        if self.num_exemplars < 0 or self.num_trajectories < 0:
            problems.append("num_exemplars and num_trajectories must be >= 0")
        unknown = (set(self.models) | set(self.temperatures) | set(self.max_tokens)) - set(ROLES)
        if unknown:
            problems.append(f"unknown roles {sorted(unknown)}; roles are {', '.join(ROLES)}")
        if set(self.category_weights) - {"improvement", "mixed", "decline"} or any(
                w < 0 for w in self.category_weights.values()):
            problems.append("category_weights takes non-negative weights for improvement, mixed, decline")
        if self.lanes < 1 or self.eval_workers < 1:
            problems.append("lanes and eval_workers must be >= 1")
        if self.executor not in ("local", "ray"):
            problems.append(f"executor must be local or ray, not {self.executor!r}")
        try:
            self.sandbox_limits()
        except ValueError as exc:
            problems.append(f"sandbox limits: {exc}".replace("\n", " "))
        if problems:
            raise ValueError("invalid run settings: " + "; ".join(problems))

    def sandbox_limits(self) -> SandboxLimits:
        """The sandbox limits of every evaluation in this run (``wall_s`` None = the task's timeout).

        Raises:
            pydantic.ValidationError (a ValueError): a limit out of range.
        """
        return SandboxLimits(wall_s=self.eval_timeout_s, cpu_s=self.eval_cpu_s, memory_mb=self.eval_memory_mb,
                             max_processes=self.eval_max_processes, output_kb=self.eval_output_kb,
                             files_mb=self.eval_files_mb, allow_network=self.eval_allow_network)

    def temperature_for(self, role: Role) -> float:
        """Sampling temperature of ``role`` (configured, else :data:`DEFAULT_TEMPERATURES`)."""
        return self.temperatures.get(role, DEFAULT_TEMPERATURES[role])

    def max_tokens_for(self, role: Role) -> int:
        """Completion-token cap of ``role`` (configured, else :data:`DEFAULT_MAX_TOKENS`)."""
        return self.max_tokens.get(role, DEFAULT_MAX_TOKENS[role])

    def to_json(self) -> dict[str, Any]:
        """Settings as a JSON-able dict, without the API key."""
        data = asdict(self)
        data.pop("api_key", None)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], **overrides: Any) -> RunContext:
        """Rebuild from :meth:`to_json` output; ``overrides`` (non-None values) win.

        Raises:
            UnknownSettingError: ``data`` or ``overrides`` name an unknown setting.
            ValueError: a value out of range.
        """
        check_setting_names([*data, *overrides])
        merged = dict(data)
        merged.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**merged)

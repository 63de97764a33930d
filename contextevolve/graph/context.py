"""Typed run settings (LangGraph ``context_schema``): everything a run is configured by.

A :class:`RunContext` holds a few run-wide fields and five groups: ``llm`` (:class:`ModelSettings`),
``search`` (:class:`SearchSettings`), ``parallelism``, ``ablations`` and ``sandbox`` (:class:`SandboxLimits`);
nodes read ``runtime.context.search.import_fixes``. Every setting also has one *flat name*, the vocabulary
of ``evolve()``, CLI flags and older run.json files: a group field's own name, or ``eval_*`` for a sandbox
limit. :class:`RunContext` accepts flat names and groups alike, so ``dataclasses.replace(ctx, workers=2)``
works. Settings are not checkpointed: the CLI saves them to ``RUN_DIR/run.json`` (secrets excluded) for
``--resume``. See docs/usage.md, *Python*.
"""

from __future__ import annotations

import difflib
import functools
import typing
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass
from typing import Any

import pydantic

from contextevolve.evaluation.limits import SandboxLimits
from contextevolve.graph.settings import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURES,
    REMOVED_SETTINGS,
    SCHEMA_CONFIG,
    Ablations,
    ModelSettings,
    Parallelism,
    SearchSettings,
)
from contextevolve.graph.typed import typed_group, typed_value
from contextevolve.roles import ROLES

__all__ = ["DEFAULT_MAX_TOKENS", "DEFAULT_TASK", "WORKER_SEED_STRIDE", "DEFAULT_TEMPERATURES", "GROUPS",
           "REMOVED_SETTINGS", "SANDBOX_DEFAULTS", "SETTINGS", "Ablations", "ModelSettings", "Parallelism",
           "RunContext", "SearchSettings", "UnknownSettingError", "check_setting_names", "flat_setting_names",
           "flat_settings", "setting_names"]

WORKER_SEED_STRIDE = 10_000
"""Distance between the LLM seeds of two workers (:meth:`RunContext.worker_seed`): above the
Generator's per-iteration offsets (repairs add 1,000 per repair plus the iteration), so no two workers
send a request with the same seed."""
DEFAULT_TASK = "model_placement"
"""The task of a run that names none (and of a run directory whose run.json does not say)."""
SANDBOX_DEFAULTS = SandboxLimits()
"""The sandbox's default limits (their one place is :class:`SandboxLimits`)."""

GROUPS: dict[str, type] = {"llm": ModelSettings, "search": SearchSettings, "parallelism": Parallelism,
                           "ablations": Ablations, "sandbox": SandboxLimits}
"""Group field of :class:`RunContext` -> its type."""
_SANDBOX_FLAT = {"eval_timeout_s": "timeout_s", "eval_cpu_s": "cpu_s", "eval_memory_mb": "memory_mb",
                 "eval_max_processes": "max_processes", "eval_output_kb": "output_kb",
                 "eval_files_mb": "files_mb", "eval_allow_network": "allow_network"}


def _group_fields(kind: type) -> list[str]:
    return list(kind.model_fields) if isinstance(kind, type) and issubclass(kind, pydantic.BaseModel) \
        else [f.name for f in fields(kind)]


SETTINGS: dict[str, tuple[str, str]] = {
    **{name: (group, name) for group, kind in GROUPS.items() if group != "sandbox"
       for name in _group_fields(kind)},
    **{flat: ("sandbox", name) for flat, name in _SANDBOX_FLAT.items()},
}
"""Flat name of every grouped setting -> (group, field): ``"workers" -> ("parallelism", "workers")``."""


class UnknownSettingError(ValueError, TypeError):
    """Run settings name a setting :class:`RunContext` does not have.

    Raised wherever a ``RunContext`` is built (keywords, ``from_json``, the context dict of a
    ``langgraph dev`` run). A ``ValueError`` for the API and CLI, and a ``TypeError`` like any unexpected
    keyword argument.
    """


def _refuse(unknown: Iterable[str], known: Iterable[str], where: str) -> None:
    unknown = sorted(set(unknown))
    if not unknown:
        return
    parts = []
    for name in unknown:
        if name in REMOVED_SETTINGS:
            default, record = REMOVED_SETTINGS[name]
            parts.append(f"{name!r} (deleted, not adopted: docs/decisions/{record}; the search now always "
                         f"runs its old default {default!r})")
            continue
        near = difflib.get_close_matches(name, sorted(known), n=1)
        parts.append(f"{name!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
    raise UnknownSettingError(f"unknown {where}{'s' if len(unknown) > 1 else ''} {', '.join(parts)}; "
                              "the settings are described by contextevolve.graph.context.RunContext")


def check_setting_names(names: Iterable[str]) -> None:
    """Refuse names that are neither a flat setting name, a run-wide field nor a group.

    Raises:
        UnknownSettingError: e.g. ``unknown run setting 'max_retry' (did you mean 'max_retries'?)``.
    """
    known = setting_names()
    names = set(names)
    if "lanes" in names:
        raise UnknownSettingError("the setting 'lanes' was replaced by 'workers' (independent evolution "
                                  "loops over one Evolve Buffer, with no barrier between them): use workers")
    _refuse(names - known, known, "run setting")


def setting_names() -> set[str]:
    """Every name a :class:`RunContext` accepts: run-wide fields, groups and flat names."""
    return {f.name for f in fields(RunContext)} | set(SETTINGS)


def flat_setting_names() -> set[str]:
    """One name per setting: the run-wide fields and the flat names of the grouped ones.

    This is the vocabulary of ``evolve()`` and of the CLI.
    """
    return ({f.name for f in fields(RunContext)} - set(GROUPS)) | set(SETTINGS)


def flat_settings(data: Mapping[str, Any]) -> dict[str, Any]:
    """Settings as saved in a run.json (grouped, or flat as older runs wrote them) keyed by flat names.

    ``{"parallelism": {"workers": 2}}`` -> ``{"workers": 2}``; a name the data does not hold is absent.
    """
    flat = {key: value for key, value in data.items() if key not in GROUPS}
    for name, (group, field_name) in SETTINGS.items():
        if isinstance(data.get(group), Mapping) and field_name in data[group]:
            flat[name] = data[group][field_name]
    return flat


_RENAMED_SETTINGS = {None: {"lanes": "workers", "generation_mode": "edit_form"},
                     "parallelism": {"lanes": "workers"}, "search": {"generation_mode": "edit_form"},
                     "sandbox": {"wall_s": "timeout_s"}}
"""Old setting names by group (None: flat) and their names today."""


def upgraded(data: Mapping[str, Any]) -> dict[str, Any]:
    """Saved settings of an older run.json in today's names (:data:`_RENAMED_SETTINGS`).

    ``lanes`` (runs before workers, buffer format 1) became ``workers``, ``generation_mode``
    ``edit_form``, the sandbox's ``wall_s`` ``timeout_s``; flat or in their group. A deleted setting
    (:data:`REMOVED_SETTINGS`) saved at its old default is dropped; at another value it stays, to be refused.
    """
    def kept(saved: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in saved.items() if k not in REMOVED_SETTINGS or v != REMOVED_SETTINGS[k][0]}

    data = kept(data)
    if isinstance(data.get("search"), Mapping):
        data["search"] = kept(data["search"])
    for group, names in _RENAMED_SETTINGS.items():
        target = data if group is None else data.get(group)
        if not isinstance(target, Mapping) or not set(names) & set(target):
            continue
        target = dict(target)
        for old, new in names.items():
            if old in target:
                target.setdefault(new, target.pop(old))
        if group is None:
            data = target
        else:
            data[group] = target
    return data


def _group(name: str, value: Any, updates: dict[str, Any]) -> Any:
    """The ``name`` group from ``value`` (None, an instance, or a dict of its fields) with ``updates``.

    Raises:
        UnknownSettingError: a dict names a field the group does not have.
        ValueError: a value of another type than its field's that pydantic cannot convert (``"3"`` for an
            int is read as 3), or a choice that is not one of the field's.
        pydantic.ValidationError: a sandbox limit out of range.
    """
    kind = GROUPS[name]
    if value is None:
        current: dict[str, Any] = {}
    elif isinstance(value, kind):
        current = value.model_dump() if isinstance(value, pydantic.BaseModel) else \
            {f.name: getattr(value, f.name) for f in fields(value)}
    elif isinstance(value, Mapping):
        current = dict(value)
        _refuse(set(current) - set(_group_fields(kind)), _group_fields(kind), f"{name} setting")
    else:
        raise ValueError(f"invalid run settings: {name} must be a {kind.__name__} or a dict, "
                         f"not {type(value).__name__}")
    if issubclass(kind, pydantic.BaseModel):
        return kind(**{**current, **updates})
    # a flat keyword of the Python API or a dict from JSON: typed here, not where a node reads it
    return typed_group(kind, {**current, **updates})


@dataclass(kw_only=True, init=False)
class RunContext:
    """Settings of one evolution run. All fields have defaults; see docs/usage.md for the CLI flags.

    ``RunContext(task="eplb", import_fixes=False, parallelism=Parallelism(workers=4))``: keywords
    are run-wide fields, groups (instances or dicts) or flat names of grouped settings
    (:data:`SETTINGS`); a flat name overrides the same field of a group given alongside.

    Raises (on construction):
        UnknownSettingError: an unknown keyword, or an unknown field in a group's dict.
        ValueError: a value out of range, or one pydantic cannot read as its field's type
            (:mod:`~contextevolve.graph.typed`).
    """

    __pydantic_config__ = SCHEMA_CONFIG

    task: str = DEFAULT_TASK
    """Registered task name (``contextevolve tasks`` lists them)."""
    run_dir: str = "runs/default"
    """Directory holding the Evolve Buffer, the Chroma index, checkpoints and run.json."""

    max_iterations: int = 10
    """Stop once this many iterations have been completed in the run. An iteration is one child (one
    candidate evaluated), in ``run``, ``compare`` and every stop rule alike: with
    ``search.samples_per_prompt`` n, the run composes about ``max_iterations / n`` prompts."""
    target_score: float | None = None
    """Stop once the best combined score reaches this (in the task's orientation)."""
    token_budget: int | None = None
    """Stop once prompt + completion tokens over all roles reach this: no iteration is claimed past it,
    and a worker that has spent its share of what was left asks for no second ask after a twin
    (:func:`~contextevolve.loop.stopping.worker_budget_spent`)."""
    cost_budget: float | None = None
    """Stop once the run's cost in US dollars reaches this (every model it uses needs a price,
    ``ModelSettings.prices``); checked when a worker claims its next iteration."""
    time_budget_s: float | None = None
    """Stop once the run's elapsed wall seconds reach this.

    The seconds are :meth:`~contextevolve.memory.buffer.EvolveBuffer.spent`: the initial program's
    evaluation plus the busiest worker's iterations, not the time the run was stopped. Checked when a
    worker claims its next iteration, so iterations in flight finish."""

    llm: ModelSettings = field(default_factory=ModelSettings)
    """Endpoints, models, sampling and retries of the agents' LLM calls."""
    search: SearchSettings = field(default_factory=SearchSettings)
    """Parent selection, context agents' inputs, generation mode, repair and pre-checks."""
    parallelism: Parallelism = field(default_factory=Parallelism)
    """Workers, concurrent LLM requests, evaluation workers and the executor (local or Ray)."""
    ablations: Ablations = field(default_factory=Ablations)
    """Agents switched off and the paper's takeaway variants."""
    sandbox: SandboxLimits = field(default_factory=SandboxLimits)
    """Limits of every candidate evaluation (``timeout_s`` None = the task's own timeout)."""

    chroma_url: str | None = None
    """``http://host:port`` of a Chroma server; ``None`` = PersistentClient in run_dir."""
    seed: int = 0
    """Seeds parent selection and trajectory sampling (per iteration, so resume is reproducible)."""
    log_prompts: bool = False
    """Keep every prompt and reply in ``run_dir/prompts.jsonl`` (:mod:`contextevolve.llm.transcript`)."""
    review_guidance: bool = False
    """Human in the loop: every iteration pauses in its ``review`` node, before ``generate``.

    The pause is a LangGraph ``interrupt`` showing its guidance; resume with ``Command(resume=text)`` to
    replace the guidance (an empty text keeps it; LangGraph 1.2 cannot resume with None). Needs a
    checkpointer (``langgraph dev`` or ``build_graph(saver)``)."""

    def __init__(self, **settings: Any) -> None:
        check_setting_names(settings)
        updates: dict[str, dict[str, Any]] = {name: {} for name in GROUPS}
        for flat, (group, name) in SETTINGS.items():
            if flat in settings:
                updates[group][name] = settings.pop(flat)
        for f in fields(self):
            if f.name in GROUPS:
                try:
                    value = _group(f.name, settings.get(f.name), updates[f.name])
                except pydantic.ValidationError as exc:
                    raise ValueError(f"invalid run settings: {f.name}: {exc}".replace("\n", " ")) from None
            elif f.name in settings:
                value = typed_value(f.name, _run_wide_hints()[f.name], settings[f.name])
            else:
                value = f.default if f.default is not MISSING else f.default_factory()
            setattr(self, f.name, value)
        self._check()

    def _check(self) -> None:
        """Raises ValueError naming every value out of range."""
        problems = []
        search, llm = self.search, self.llm
        if self.max_iterations < 0:
            problems.append("max_iterations must be >= 0")
        if self.time_budget_s is not None and self.time_budget_s <= 0:
            problems.append("time_budget_s must be > 0")
        if self.cost_budget is not None and self.cost_budget <= 0:
            problems.append("cost_budget must be > 0 (US dollars)")
        if any(p.input < 0 or p.output < 0 for p in llm.prices.values()):
            problems.append("prices must be >= 0 (US dollars per million tokens)")
        if llm.max_retries < 0 or llm.retry_wait_s < 0:
            problems.append("max_retries and retry_wait_s must be >= 0")
        if search.samples_per_prompt < 1:
            problems.append("samples_per_prompt must be >= 1 (children asked for with one composed prompt)")
        if search.unguided_hotter < 0:
            problems.append("unguided_hotter must be >= 0 (it is added to the Generator's temperature)")
        if search.stale_after < 0:
            problems.append("stale_after must be >= 0 (0: a parent is never left out for its twins)")
        if search.stale_rest < 0:
            problems.append("stale_rest must be >= 0 (iterations a stale parent is left out for)")
        if isinstance(search.mutations, str) or not search.mutations or any(
                not isinstance(m, str) or not m.strip() for m in search.mutations):
            problems.append("mutations must name at least one change, and none may be empty (each completes "
                            "\"Make one concrete change to how this program computes its result: ...\")")
        if search.num_exemplars < 0 or search.num_trajectories < 0:
            problems.append("num_exemplars and num_trajectories must be >= 0")
        if not 0 < search.navigator_sampler_share <= 1:
            problems.append("navigator_sampler_share must be in (0, 1] (1: the Navigator and the Sampler are "
                            "asked whatever they spent, as in the paper)")
        unknown = (set(llm.models) | set(llm.temperatures) | set(llm.max_tokens)) - set(ROLES)
        if unknown:
            problems.append(f"unknown roles {sorted(unknown)}; roles are {', '.join(ROLES)}")
        if set(search.category_weights) - {"improvement", "mixed", "decline", "no_effect"} or any(
                w < 0 for w in search.category_weights.values()):
            problems.append("category_weights takes non-negative weights for improvement, mixed, decline, "
                            "no_effect")
        where = self.parallelism
        if where.workers < 1 or any(n is not None and n < 1
                                    for n in (where.eval_workers, where.llm_concurrency)):
            problems.append("workers, eval_workers and llm_concurrency must be >= 1")
        if problems:
            raise ValueError("invalid run settings: " + "; ".join(problems))

    def worker_seed(self, worker: int) -> int:
        """The LLM seed of worker ``worker``'s requests (0-based): ``seed + WORKER_SEED_STRIDE * worker``.

        Worker 0 keeps the run's seed, so a one-worker run samples as before. Other workers get their own
        because their first iterations share the same parent and have no guidance yet: with one seed an
        endpoint that honours seeds answers them with the same program.
        """
        return self.seed + WORKER_SEED_STRIDE * worker

    @property
    def eval_slots(self) -> int:
        """Evaluations at once: ``parallelism.eval_workers``, or one per worker when unset."""
        return self.parallelism.eval_workers or self.parallelism.workers

    @property
    def summarizes_behind(self) -> bool:
        """Whether the Summarizer overlaps its worker's next iteration.

        ``parallelism.summarize_behind``; by default on with more than one worker.
        """
        behind = self.parallelism.summarize_behind
        return self.parallelism.workers > 1 if behind is None else behind

    @property
    def llm_slots(self) -> int:
        """LLM requests in flight per endpoint: ``parallelism.llm_concurrency``, else one per worker."""
        return self.parallelism.llm_concurrency or self.parallelism.workers

    def server_slots(self, generator: bool) -> int:
        """Requests an embedded server decodes together: :attr:`llm_slots`, times n for the Generator's.

        n is ``search.samples_per_prompt``: one request of n choices takes n slots of the server that answers
        the Generator.
        """
        return self.llm_slots * (self.search.samples_per_prompt if generator else 1)

    def to_json(self) -> dict[str, Any]:
        """Settings as a JSON-able dict of run-wide fields and groups, without the API key."""
        data: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            data[f.name] = value.model_dump() if isinstance(value, pydantic.BaseModel) else \
                asdict(value) if is_dataclass(value) else value
        data["llm"].pop("api_key", None)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], **overrides: Any) -> RunContext:
        """Rebuild from :meth:`to_json` output (or an older run.json with flat names).

        ``overrides`` (flat names, non-None values) win.

        Raises:
            UnknownSettingError: ``data`` or ``overrides`` name an unknown setting.
            ValueError: a value out of range or of another type than its field's.
        """
        data = upgraded(data)
        check_setting_names([*data, *overrides])
        merged = dict(data)
        merged.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**merged)


@functools.cache
def _run_wide_hints() -> dict[str, Any]:
    """The annotations of :class:`RunContext`'s fields, resolved once."""
    return typing.get_type_hints(RunContext)

"""The groups of a run's settings: models, search, parallelism, ablations.

Each group is a dataclass whose every field has its default and a docstring here (the one place
both are written); :class:`contextevolve.graph.context.RunContext` holds one of each, plus the
sandbox's :class:`contextevolve.evaluation.limits.SandboxLimits`. The field docstrings are also
the descriptions LangGraph Studio shows for the context schema (pydantic reads them:
``use_attribute_docstrings``). Values are checked by ``RunContext`` as a whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ConfigDict

from contextevolve.agents import AGENTS
from contextevolve.program.forms import EditFormName
from contextevolve.program.mutations import MUTATIONS
from contextevolve.roles import Role

DEFAULT_MAX_TOKENS: dict[str, int] = {a.name: a.max_tokens for a in AGENTS}
"""Default completion-token cap per role (declared with the agents, :mod:`contextevolve.agents`)."""
DEFAULT_TEMPERATURES: dict[str, float] = {a.name: a.temperature for a in AGENTS}
"""Default sampling temperature per role: creative generator, steady context agents."""

SCHEMA_CONFIG = ConfigDict(use_attribute_docstrings=True)
"""Pydantic config of every settings class: field docstrings become JSON-schema descriptions."""


@dataclass(kw_only=True, frozen=True)
class Price:
    """What a model costs, US dollars per million tokens (the unit providers quote)."""

    __pydantic_config__ = SCHEMA_CONFIG

    input: float
    """Dollars per million prompt tokens."""
    output: float
    """Dollars per million completion tokens."""


def price_problem(model: str, given: object) -> str:
    """The sentence naming a price ``given`` for ``model`` that is not a :class:`Price`'s two numbers."""
    return (f"the price of {model!r} must be {{'input': X, 'output': Y}} in dollars per million tokens, "
            f"not {given!r}")


@dataclass(kw_only=True)
class ModelSettings:
    """Where each agent's LLM is and how it is called (``RunContext.llm``).

    Resolution order per role (endpoint, key, model): :mod:`contextevolve.llm.models`.
    """

    __pydantic_config__ = SCHEMA_CONFIG

    base_url: str | None = None
    """OpenAI-compatible endpoint for every role; ``None`` = environment, else the embedded LLM."""
    api_key: str | None = field(default=None, repr=False)
    """API key for ``base_url``; ``None`` = environment. Never written to run.json."""
    model: str | None = None
    """Model name for every role without its own entry in ``models``."""
    models: dict[str, str] = field(default_factory=dict)
    """Model per role, e.g. ``{"generator": "qwen2.5-coder-32b"}``."""
    embedded: bool = False
    """Every role uses the embedded model, whatever ``base_url``, a config file or the environment name."""
    prices: dict[str, Price] = field(default_factory=dict)
    """Price per model name, e.g. ``{"gpt-5-mini": Price(input=0.25, output=2.0)}``: costs are shown for the
    models priced here, and never guessed for the others."""
    temperatures: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TEMPERATURES))
    """Sampling temperature per role."""
    max_tokens: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_MAX_TOKENS))
    """Completion-token cap per role."""
    top_p: float | None = None
    """Nucleus-sampling mass for every role; ``None``: the embedded model's recommended 0.8
    (:data:`contextevolve.llm.embedded.TOP_P`), none sent to an external endpoint (its own default)."""
    top_k: int | None = None
    """Top-k sampling for every role, sent as an extra body field (llama.cpp, vLLM and Ollama read
    it; never sent to api.openai.com, which refuses it); ``None``: the embedded model's recommended
    20, none sent to an external endpoint."""
    request_timeout_s: float = 600.0
    """Timeout of one LLM request, seconds."""
    max_retries: int = 4
    """Retries of an LLM request on connection, rate-limit and 5xx errors and on malformed replies
    (non-JSON body, no choices, empty or truncated completion)."""
    retry_wait_s: float = 1.0
    """First backoff wait between retries, seconds; it doubles per retry (up to 60 s) plus up to
    ``retry_wait_s`` of random jitter."""
    embedded_server_per_role: bool | None = None
    """Embedded LLM only: the Navigator and the Generator each get a llama.cpp server of their own (the
    Summarizer and the Sampler share a third), so each agent's shared prompt prefix is not read again
    (:data:`contextevolve.llm.models.OWN_SERVER_ROLES`; docs/decisions/search-settings.md). None: on with
    one worker, off with more (several servers would share the same cores); True with several workers is
    ignored, with a warning. False: one server for all."""

    def __post_init__(self) -> None:
        """Read prices given as dicts (run.json, a Python caller) as :class:`Price`.

        Raises:
            ValueError: a price that is not ``{"input": X, "output": Y}`` with numbers.
        """
        prices = {}
        for model, price in self.prices.items():
            if not isinstance(price, Price):
                try:
                    given = Price(**price)
                    price = Price(input=float(given.input), output=float(given.output))
                except (TypeError, ValueError):
                    raise ValueError(f"invalid run settings: {price_problem(model, price)}") from None
            prices[model] = price
        self.prices = prices

    def server_per_role(self, workers: int) -> bool:
        """Whether agents get embedded servers of their own in a run of ``workers`` workers."""
        return workers == 1 and self.embedded_server_per_role is not False

    def temperature_for(self, role: Role) -> float:
        """Sampling temperature of ``role`` (configured, else :data:`DEFAULT_TEMPERATURES`)."""
        return self.temperatures.get(role, DEFAULT_TEMPERATURES[role])

    def max_tokens_for(self, role: Role) -> int:
        """Completion-token cap of ``role`` (configured, else :data:`DEFAULT_MAX_TOKENS`)."""
        return self.max_tokens.get(role, DEFAULT_MAX_TOKENS[role])


@dataclass(kw_only=True)
class SearchSettings:
    """How the search runs: parent selection, the context agents' inputs, generation and import fixes.

    The ``RunContext.search`` group.
    """

    __pydantic_config__ = SCHEMA_CONFIG

    samples_per_prompt: int = 3
    """n: children one composed prompt yields. The parent, the Navigator's guidance, the Sampler's exemplars
    and the Generator's prompt are made once and asked for ``n`` replies (one request of ``n`` choices where
    the endpoint takes it, else ``n`` requests); each reply is a child of its own, evaluated, summarized and
    committed as such. Each child counts as one of the run's iterations. 1: one child per prompt, as in the
    paper (docs/decisions/samples-per-prompt.md)."""
    parent_selection: Literal["pareto", "tournament", "best", "random"] = "pareto"
    """How select_parent picks c_p among ok programs. ``pareto``: among those best on some metric and
    dominated by none, weighted by how many metrics each is best on, so a child that traded one metric for
    another stays a parent; a tournament while one program leads every metric
    (docs/decisions/pareto-parents.md). ``tournament``: best of three drawn uniformly, as before."""
    stale_after: int = 2
    """A parent whose last ``stale_after`` children were all twins (copies of a stored program, or
    behavioural twins) is left out of parent selection for ``stale_rest`` iterations while another ok
    program is left; 0: never (docs/decisions/search-settings.md)."""
    stale_rest: int = 4
    """Iterations a stale parent is left out for, counted from its last child; then it may be drawn again,
    and one more twin makes it stale again; 0: not left out. Without a rest, a run whose good programs all
    went stale spends its remaining iterations on the poor ones; a rest at least the run's iterations
    leaves a stale parent out for good, as before the rest existed (docs/decisions/search-settings.md)."""
    behavioural_twins: bool = True
    """A valid child whose results equal a stored program's (its outputs, or every metric to the bit) is a
    behavioural twin: never a parent, no Summarizer call, a "no effect" step for the Navigator, and the
    Generator is asked once more, told its change had no effect (:mod:`contextevolve.loop.behaviour`);
    False: such a child is an ordinary valid one, as in the paper."""
    num_trajectories: int = 4
    """m: parent->child steps shown to the Navigator."""
    category_weights: dict[str, float] = field(
        default_factory=lambda: {"improvement": 0.5, "mixed": 0.3, "decline": 0.2, "no_effect": 0.2})
    """p(Δs): sampling weight of each trajectory category (``no_effect``: a behavioural twin's step)."""
    num_exemplars: int = 2
    """k: exemplars the Sampler hands to the Generator, of the six candidates retrieval offers it (two of them
    failed programs); the agent is asked only when there are at least k + 2, a real choice
    (:mod:`contextevolve.nodes.sample`)."""
    navigator_sampler_share: float = 0.15
    """Share of the run's tokens the Navigator and the Sampler agent may have spent for either to be asked
    again: above it the Navigator's last guidance is reused (it is asked while it has written none) and
    the exemplars are retrieval's first, as without a real choice. The Summarizer is not capped (its
    abstracts are the memory). On small programs these two agents cost as much as the Generator's prompts,
    and cheaper candidates buy more of them (docs/decisions/navigator-sampler-share.md). 1.0: no cap, as
    in the paper."""
    summarize_invalid: bool = False
    """Ask the Summarizer about an invalid child too, as the paper does; off: its abstract is why it is
    invalid and the idea it tried, written without a call (it is read again only as a warning)."""
    context_token_budget: int = 3500
    """Token budget of the composed generator context Φ (parent code included)."""
    edit_form: EditFormName = "full"
    """How the Generator writes a child: the whole program, SEARCH/REPLACE edits against the
    parent, or only the whole functions it changes (:mod:`contextevolve.program.forms`;
    docs/decisions/generation-mode.md)."""
    unguided_hotter: float = 0.3
    """Temperature added to the Generator's first ask when the Navigator gave no guidance (ignored with the
    Navigator switched off, so that ablation changes one thing); 0: the Generator's own
    (docs/decisions/search-settings.md)."""
    mutations: tuple[str, ...] = MUTATIONS
    """The concrete changes an ask after a twin names, one per ask, in turn by seed and iteration: each is
    a clause that completes "Make one concrete change to how this program computes its result: ...". The
    default list suits the built-in tasks and one-line policies; a problem of another kind may name its own
    (docs/decisions/second-ask-mutations.md)."""
    stop_at_code_end: bool = True
    """End the Generator's completion where its code block closes, in an edit form whose reply
    is one block: the prose a small model writes after its code is never read."""
    import_fixes: bool = True
    """A child that fails on a missing import of a known name gets the import added without a model call
    (:mod:`contextevolve.program.fixes`), its only repair: no failure goes back to the model
    (docs/decisions/repair-restart.md); off: the paper's algorithm."""
    prechecks: bool = True
    """Check that a child compiles, has the entry function's signature and survives a smoke run on one
    small case before its full evaluation (a failure is not evaluated in full)."""

    def __post_init__(self) -> None:
        """Read ``mutations`` given as a list (run.json, a Python caller) as a tuple.

        A string stays one, and ``RunContext`` names the problem.
        """
        if not isinstance(self.mutations, str | tuple):
            self.mutations = tuple(self.mutations)


REMOVED_SETTINGS: dict[str, tuple[Any, str]] = {
    "step_changes": (0, "step-changes.md"),
    "summary_changes": (0, "summarizer-abstracts.md"),
    "copied_parent_ask": ("full", "copied-parent-ask.md"),
    "second_ask": ("mutation", "hole-ask.md"),
    "second_ask_top_p": (None, "change-line.md"),
    "second_ask_top_k": (None, "change-line.md"),
    "mutation_choice": ("turn", "second-ask-mutations.md"),
    "exemplar_view": ("program", "copy-warning.md"),
    "repair_attempts": (0, "repair-restart.md"),
    "repair_restart": (True, "repair-restart.md"),
    "tournament_size": (3, "pareto-parents.md"),
    "guidance_refresh_steps": (2, "search-settings.md"),
    "sampler_choice": (2, "search-settings.md"),
    "candidate_pool": (6, "failed-exemplars.md"),
    "failed_candidates": (2, "failed-exemplars.md"),
    "docstrings_shown": (True, "search-settings.md"),
    "exemplar_docstrings": (True, "exemplar-docstrings.md"),
    "change_line": ("second_ask", "change-line.md"),
}
"""``SearchSettings`` fields deleted because they were tried and not adopted, or never shown to pay on their
own: each one's default while it existed (the search runs that value today) and its decision record in
docs/decisions/. An older run.json
holds them: at their default they are dropped (:func:`contextevolve.graph.context.upgraded`); at another
value, which this version cannot run, the setting is refused, naming its record."""


@dataclass(kw_only=True)
class Parallelism:
    """How many children and evaluations are in flight, and where evaluations run.

    The ``RunContext.parallelism`` group.
    """

    __pydantic_config__ = SCHEMA_CONFIG

    workers: int = 1
    """Independent evolution loops over the run's one Evolve Buffer, each a LangGraph thread that starts
    its next iteration as soon as its child is committed (no barrier between workers); 1 = the paper's
    sequential algorithm."""
    llm_concurrency: int | None = None
    """LLM requests in flight at once per endpoint, over all workers (None: one per worker)."""
    summarize_behind: bool | None = None
    """The Summarizer's call for a child overlaps its worker's next iteration: the child is committed when its
    abstract arrives, and the next iteration reads the steps committed so far. None: on with more than one
    worker (one worker keeps the paper's order, where the next iteration sees the child)."""
    eval_workers: int | None = None
    """Evaluations running at once (local processes, or Ray tasks in flight); None: one per worker."""
    executor: Literal["local", "ray"] = "local"
    """Where evaluations run: sandboxed processes on this machine, or Ray tasks on a cluster."""
    ray_address: str | None = None
    """Ray cluster address for ``executor="ray"`` (``HOST:PORT``, ``ray://...``, ``auto``);
    ``None`` starts a local Ray instance."""


@dataclass(kw_only=True)
class Ablations:
    """The paper's ablations (an agent switched off) and takeaway variants (``RunContext.ablations``)."""

    __pydantic_config__ = SCHEMA_CONFIG

    summarizer_enabled: bool = True
    """False: no Summarizer; a program's 'abstract' is its truncated source."""
    navigator_enabled: bool = True
    """False: no Navigator; the Generator gets no guidance."""
    sampler_enabled: bool = True
    """False: no Sampler agent; exemplars are the k best-scoring programs."""
    summary_variant: Literal["inherited", "novel_only"] = "inherited"
    """``novel_only``: the Summarizer describes only what is new (paper takeaway a; its effect:
    docs/decisions/ablation-variants.md)."""
    guidance_variant: Literal["directional", "implementation"] = "directional"
    """``implementation``: the Navigator prescribes concrete steps (takeaway b; its effect:
    docs/decisions/ablation-variants.md)."""
    sampling_variant: Literal["informative", "top_score"] = "informative"
    """``top_score``: candidates are only the highest-scoring programs (takeaway c; its effect:
    docs/decisions/ablation-variants.md)."""

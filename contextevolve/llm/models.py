"""Chat model per agent role, created lazily from run settings and the environment.

For each role the first that is set wins (``RunContext.llm`` is ``L``):

* endpoint: ``L.base_url``, ``CONTEXTEVOLVE_<ROLE>_BASE_URL``, ``CONTEXTEVOLVE_BASE_URL``,
  ``OPENAI_BASE_URL``, else the embedded local LLM;
* API key: ``L.api_key``, ``CONTEXTEVOLVE_<ROLE>_API_KEY``, ``CONTEXTEVOLVE_API_KEY``, ``OPENAI_API_KEY``;
* model: ``L.models[role]``, ``CONTEXTEVOLVE_<ROLE>_MODEL``, ``L.model``, ``CONTEXTEVOLVE_MODEL``.

Only a base URL selects an endpoint, so a stray ``OPENAI_API_KEY`` never sends a run to a paid API.
``L.embedded`` wins over all of them: every role uses the embedded LLM.
:func:`use_chat_models` puts any LangChain chat model in a role's place.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from contextevolve.agents import AGENTS
from contextevolve.roles import Role

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from contextevolve.graph.context import RunContext


class LLMConfigError(ValueError):
    """The LLM settings for a role are incomplete or contradictory."""


@dataclass(frozen=True)
class Endpoint:
    """Where and what one role calls: ``base_url`` (``None`` = embedded), api key, model."""

    base_url: str | None
    api_key: str | None
    model: str | None


def _env(role: Role, suffix: str, *fallbacks: str) -> str | None:
    for name in (f"CONTEXTEVOLVE_{role.upper()}_{suffix}", *fallbacks):
        value = os.environ.get(name)
        if value:
            return value
    return None


def resolve_endpoint(role: Role, ctx: RunContext) -> Endpoint:
    """The endpoint ``role`` uses under ``ctx`` and the environment (see module docstring)."""
    if ctx.llm.embedded:
        return Endpoint(None, None, None)
    base_url = ctx.llm.base_url or _env(role, "BASE_URL", "CONTEXTEVOLVE_BASE_URL", "OPENAI_BASE_URL")
    api_key = ctx.llm.api_key or _env(role, "API_KEY", "CONTEXTEVOLVE_API_KEY", "OPENAI_API_KEY")
    model = (ctx.llm.models.get(role) or _env(role, "MODEL") or ctx.llm.model
             or os.environ.get("CONTEXTEVOLVE_MODEL"))
    return Endpoint(base_url, api_key, model)


_overrides: dict[str, BaseChatModel] = {}
_overrides_lock = threading.Lock()


@contextmanager
def use_chat_models(**models: BaseChatModel) -> Iterator[None]:
    """Use the given LangChain chat models for these roles while the block runs.

    Example: ``with use_chat_models(generator=ChatAnthropic(...)): evolve(...)``.
    Unit tests pass LangChain fake chat models this way.
    """
    from contextevolve.roles import ROLES

    unknown = set(models) - set(ROLES)
    if unknown:
        raise LLMConfigError(f"unknown roles {sorted(unknown)}; roles are {', '.join(ROLES)}")
    with _overrides_lock:
        saved = dict(_overrides)
        _overrides.update(models)
    try:
        yield
    finally:
        with _overrides_lock:
            _overrides.clear()
            _overrides.update(saved)


def needs_embedded(ctx: RunContext) -> bool:
    """True when some switched-on role has neither an override nor an endpoint, so uses the embedded LLM."""
    return bool(embedded_server_keys(ctx))


OWN_SERVER_ROLES: tuple[str, ...] = tuple(a.name for a in AGENTS if a.own_server)
"""Agents that get an embedded server of their own (``ctx.llm.embedded_server_per_role``).

A server re-reads a prompt only from the first token where it differs from the request just before it.
The Navigator's and the Generator's prompts start like their previous ones (instructions, task, history or
often the same parent), so a server of their own reads less; the Summarizer's and the Sampler's differ
right after the instructions, so those two share one server and its memory (why, and what it saved:
docs/results.md, *A server per agent*)."""


def embedded_server_key(role: Role, ctx: RunContext) -> str:
    """Which process-wide embedded server ``role`` talks to: its own, or the one the others share.

    Its own for a role of :data:`OWN_SERVER_ROLES` under ``ctx.llm.embedded_server_per_role`` with one
    worker; else :data:`contextevolve.llm.embedded.SHARED`.
    """
    from contextevolve.llm.embedded import SHARED

    own = ctx.llm.server_per_role(ctx.parallelism.workers) and role in OWN_SERVER_ROLES
    return role if own else SHARED


def embedded_server_keys(ctx: RunContext) -> list[str]:
    """The embedded servers a run needs, as keys; ``[]`` when no role uses the embedded LLM.

    One key per role that is switched on (the ablations) and has neither an override (:func:`use_chat_models`)
    nor an endpoint (settings, or the environment read now), through :func:`embedded_server_key`, in role
    order, without repeats.
    """
    from contextevolve.roles import ROLES

    keys = [embedded_server_key(role, ctx) for role in ROLES
            if getattr(ctx.ablations, f"{role}_enabled", True) and uses_embedded(role, ctx)]
    return list(dict.fromkeys(keys))


def uses_embedded(role: Role, ctx: RunContext) -> bool:
    """True when ``role`` has neither an override nor an endpoint, so its requests go to the embedded LLM."""
    with _overrides_lock:
        overridden = role in _overrides
    return not overridden and not resolve_endpoint(role, ctx).base_url


@lru_cache(maxsize=32)
def _chat_openai(base_url: str, api_key: str, model: str, temperature: float | None, max_tokens: int,
                 timeout: float, seed: int | None, top_p: float | None = None,
                 top_k: int | None = None) -> BaseChatModel:
    from urllib.parse import urlparse

    from langchain_openai import ChatOpenAI

    # langchain-openai sends the cap as `max_completion_tokens`, which llama.cpp's server (and
    # other OpenAI-compatible servers) ignore; send the classic `max_tokens` too, except to
    # OpenAI itself, which rejects requests carrying both.
    official = (urlparse(base_url).hostname or "").endswith("openai.com")
    extra = None if official else {"max_tokens": max_tokens}
    if extra is not None and top_k is not None:  # not an OpenAI parameter: servers that read it
        extra["top_k"] = top_k
    # Retries are added by the caller (with_retry) so they are visible and testable.
    return ChatOpenAI(base_url=base_url, api_key=api_key, model=model, temperature=temperature,
                      max_tokens=max_tokens, timeout=timeout, max_retries=0, extra_body=extra, seed=seed,
                      top_p=top_p)


OPTIONAL_PARAMETERS = ("stop", "temperature", "top_p", "seed", "response_format", "n")
"""Request parameters a run can do without.

Some endpoints refuse some of them with HTTP 400 (OpenAI's reasoning models refuse ``stop`` and any
``temperature`` but their default); a request refused for one of them is sent again without it
(:func:`contextevolve.llm.calls.call_role`). Each only saves tokens or shapes sampling: the replies are parsed
the same without them (a program's code block is found in a reply that goes on after it, JSON in a reply that
is not in JSON mode); without ``n``, several replies to one prompt are asked for one request each."""

_refused: dict[tuple[str, str], set[str]] = {}
_refused_lock = threading.Lock()


def refused_parameters(base_url: str | None, model: str | None) -> frozenset[str]:
    """The :data:`OPTIONAL_PARAMETERS` that endpoint ``base_url`` refused for ``model`` in this process."""
    with _refused_lock:
        return frozenset(_refused.get((str(base_url), str(model)), ()))


def refuse_parameter(base_url: str | None, model: str | None, parameter: str) -> bool:
    """Remember that ``base_url`` refuses ``parameter`` for ``model``; True when it is news.

    Later chat models for it (:func:`create_chat_model`) and requests (``call_role``) leave it out.

    Raises:
        ValueError: ``parameter`` is not one of :data:`OPTIONAL_PARAMETERS` (a run cannot do without it).
    """
    if parameter not in OPTIONAL_PARAMETERS:
        raise ValueError(f"{parameter!r} is not an optional request parameter "
                         f"({', '.join(OPTIONAL_PARAMETERS)})")
    with _refused_lock:
        refused = _refused.setdefault((str(base_url), str(model)), set())
        news = parameter not in refused
        refused.add(parameter)
    return news


def create_chat_model(role: Role, ctx: RunContext, *, temperature: float | None = None,
                      seed: int | None = None, top_p: float | None = None,
                      top_k: int | None = None) -> BaseChatModel:
    """The chat model for ``role``: an override, an external endpoint, or the embedded LLM.

    ``temperature``, ``seed``, ``top_p`` and ``top_k`` replace the run's (``ctx.llm.temperature_for(role)``,
    ``ctx.seed``, ``ctx.llm.top_p``, ``ctx.llm.top_k``) for this model; an override model (tests) keeps its
    own. A sampling parameter the endpoint refused (:func:`refuse_parameter`) is left out.

    Raises:
        LLMConfigError: an external endpoint is configured without a model name.
        contextevolve.llm.embedded.EmbeddedModelError: the embedded LLM cannot be started.
    """
    with _overrides_lock:
        override = _overrides.get(role)
    if override is not None:
        return override
    endpoint = resolve_endpoint(role, ctx)
    if endpoint.base_url:
        if not endpoint.model:
            raise LLMConfigError(
                f"an endpoint is configured ({endpoint.base_url}) but no model for role {role!r}: "
                f"set --model, CONTEXTEVOLVE_MODEL or CONTEXTEVOLVE_{role.upper()}_MODEL")
        base_url, api_key, model = endpoint.base_url, endpoint.api_key or "not-needed", endpoint.model
        run_top_p, run_top_k = ctx.llm.top_p, ctx.llm.top_k  # None: the endpoint's own defaults
    else:
        from contextevolve.llm import embedded

        key = embedded_server_key(role, ctx)
        server = embedded.shared_server(key, ctx.server_slots(key == embedded_server_key("generator", ctx)))
        base_url, api_key, model = server.base_url, "not-needed", embedded.MODEL_ALIAS
        run_top_p = embedded.TOP_P if ctx.llm.top_p is None else ctx.llm.top_p
        run_top_k = embedded.TOP_K if ctx.llm.top_k is None else ctx.llm.top_k
    top_p = run_top_p if top_p is None else top_p
    top_k = run_top_k if top_k is None else top_k
    # The run seed is passed on as the OpenAI `seed` for endpoints that honour it. (Two fresh
    # embedded runs without it produced identical first iterations; llama.cpp's server keeps one
    # RNG stream, so repeated requests still differ within a run.)
    temperature = ctx.llm.temperature_for(role) if temperature is None else temperature
    seed = ctx.seed if seed is None else seed
    refused = refused_parameters(base_url, model)  # None: ChatOpenAI leaves the parameter out
    return _chat_openai(base_url, api_key, model, None if "temperature" in refused else temperature,
                        ctx.llm.max_tokens_for(role), ctx.llm.request_timeout_s,
                        None if "seed" in refused else seed, None if "top_p" in refused else top_p, top_k)

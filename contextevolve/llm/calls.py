"""One agent call: messages in, text and token usage out, with retries on endpoint faults.

After ``ctx.llm.max_retries`` retries (backoff with jitter from ``ctx.llm.retry_wait_s``, doubling up to
:data:`MAX_WAIT_S`): connection errors, 429 and 5xx raise :class:`EndpointUnavailable`, as a 4xx does at
once, except a 400/422 refusing an optional parameter (:func:`refused_parameter`): it and later requests to
that endpoint and model go without it. An unusable reply (unreadable, empty, a client-side error, rejected
by the caller's ``check``) raises :class:`MalformedReply`. A JSON-mode reply cut off at the token cap is a
truncated :class:`Reply`.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from contextevolve.llm import models, transcript
from contextevolve.llm.faults import EndpointUnavailable, MalformedReply
from contextevolve.llm.tokens import CHARS_PER_TOKEN, choice_counts, estimate_tokens
from contextevolve.roles import Role, TokenUsage, add_usage
from contextevolve.timing import LLMCall, note_call

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage, BaseMessage

    from contextevolve.graph.context import RunContext

__all__ = ["CHARS_PER_TOKEN", "EndpointUnavailable", "MalformedReply", "Reply", "call_choices", "call_role",
           "choice_counts", "estimate_tokens"]

_log = logging.getLogger(__name__)

MAX_WAIT_S = 60.0
"""Longest backoff wait between two attempts, seconds."""


def _retryable() -> tuple[type[BaseException], ...]:
    import openai

    return (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)


_UNREADABLE = (ValueError, TypeError, LookupError, AttributeError)
"""What the OpenAI client / LangChain raise for a 200 they cannot read (besides the client's own
``APIResponseValidationError``): a non-JSON body (JSONDecodeError, ValueError), JSON without
``choices`` (TypeError), empty ``choices`` (IndexError), a choice without a message
(AttributeError), an ``error`` object in the body (ValueError)."""


@dataclass
class Reply:
    """An agent's answer.

    ``text``, ``usage`` as ``{role: {prompt, completion}}``, and whether it was cut off at the
    completion-token cap (``truncated``).
    """

    text: str
    usage: TokenUsage = field(default_factory=dict)
    truncated: bool = False
    seconds: float = 0.0
    """Wall seconds of the whole call, every attempt and backoff wait included."""


def _to_reply(role: Role, messages: list[BaseMessage], message: AIMessage) -> Reply:
    text = message.content if isinstance(message.content, str) else "".join(
        part.get("text", "") if isinstance(part, dict) else str(part) for part in message.content)
    meta = getattr(message, "usage_metadata", None) or {}
    prompt = meta.get("input_tokens")
    completion = meta.get("output_tokens")
    if prompt is None:  # endpoint reported nothing: estimate rather than count zero
        prompt = sum(estimate_tokens(str(m.content)) for m in messages)
        completion = estimate_tokens(text)
    finish = (getattr(message, "response_metadata", None) or {}).get("finish_reason")
    return Reply(text=text, usage={role: {"prompt": int(prompt), "completion": int(completion or 0)}},
                 truncated=finish == "length")


def _cut_off(completion) -> AIMessage:
    """The message of a completion that stopped at the token cap.

    The OpenAI client raises such a completion as ``LengthFinishReasonError`` instead of returning it (it
    does so for ``response_format`` requests).
    """
    from langchain_core.messages import AIMessage

    choice = completion.choices[0] if completion.choices else None
    usage = completion.usage
    meta = {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens} if usage else None
    return AIMessage(content=(choice.message.content or "") if choice else "", usage_metadata=meta,
                     response_metadata={"finish_reason": "length"})


def _sum(usages: list[TokenUsage]) -> TokenUsage:
    return functools.reduce(add_usage, usages, {})


def _connection_problem(exc: BaseException) -> str:
    """What went wrong with a connection, one line: the innermost cause, or a timeout.

    E.g. ``connection failed: ConnectError: [Errno 111] Connection refused``.
    """
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return "request timed out"
    root = exc
    while root.__cause__ is not None or root.__context__ is not None:
        root = root.__cause__ or root.__context__
    return f"connection failed: {_one_line(root)}"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


_REFUSAL = re.compile(r"unsupported|not supported|unrecognized|unknown|not permitted|not allowed", re.I)
"""Words of an error message that refuses a parameter rather than the request's content."""
REFUSAL_CODES = ("unsupported_parameter", "unsupported_value")
"""OpenAI's error codes for a parameter the model does not take (any value, or any but its default)."""


def refused_parameter(exc: BaseException) -> str | None:
    """The optional request parameter a 400/422 error refuses as such, or None.

    One of :data:`~contextevolve.llm.models.OPTIONAL_PARAMETERS`, refused by an error that says so (a
    :data:`REFUSAL_CODES` code, or a message saying unsupported, unknown or not permitted) naming it in its
    ``param`` field (OpenAI: ``{"param": "stop", "code": "unsupported_parameter"}``) or quoting it alone in
    its message. None when it refuses something else, a setting's value among them: a temperature out of range
    stops the run with the endpoint's message rather than being dropped.
    """
    text = str(getattr(exc, "message", "") or exc)
    if not (_REFUSAL.search(text) or getattr(exc, "code", None) in REFUSAL_CODES):
        return None  # e.g. a value out of range ("Invalid 'temperature': decimal above maximum value")
    param = getattr(exc, "param", None)
    if isinstance(param, str) and param in models.OPTIONAL_PARAMETERS:
        return param
    named = [name for name in models.OPTIONAL_PARAMETERS if re.search(rf"['\"`]{name}['\"`]", text)]
    return named[0] if len(named) == 1 else None


_SLOTS: dict[tuple[str | None, int], threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()


def request_slot(base_url: str | None, slots: int) -> threading.BoundedSemaphore:
    """The semaphore bounding requests in flight to ``base_url`` at ``slots`` (``RunContext.llm_slots``).

    It is shared by every worker of the process: a request holds one while it waits for its reply.
    """
    with _SLOTS_LOCK:
        return _SLOTS.setdefault((base_url, slots), threading.BoundedSemaphore(slots))


def call_role(role: Role, messages: list[BaseMessage], ctx: RunContext, *, json_mode: bool = False,
              check: Callable[[Reply], None] | None = None, stop: list[str] | None = None,
              temperature: float | None = None, seed: int | None = None, top_p: float | None = None,
              top_k: int | None = None) -> Reply:
    """Send ``messages`` to ``role``'s chat model and return its :class:`Reply`.

    Args:
        role: the agent whose chat model answers (:func:`contextevolve.llm.models.create_chat_model`).
        messages: the conversation to send.
        ctx: the run's settings.
        temperature: default ``ctx.llm.temperature_for(role)``.
        seed: default ``ctx.seed``; attempt n sends ``seed + n - 1`` to a model that takes a seed.
        top_p: nucleus-sampling mass; default the run's (:func:`contextevolve.llm.models.create_chat_model`).
        top_k: top-k cut; default the run's.
        json_mode: ask for ``response_format={"type": "json_object"}``.
        check: called on every reply; raising :class:`MalformedReply` marks it unusable (retried).
        stop: stop sequences; the completion ends before the first one.

    Every attempt goes to the transcript with ``ctx.log_prompts``; seconds and tokens are booked by
    :func:`contextevolve.timing.note_call`, usable reply or not.

    Returns:
        The first usable reply; its ``usage`` sums the tokens reported by every attempt.

    Raises:
        EndpointUnavailable: as the module docstring says.
        MalformedReply: no usable reply after the retries (``usage``, ``attempts`` filled in).
        contextevolve.llm.models.LLMConfigError: incomplete endpoint settings.
    """
    return _request(role, messages, ctx, 1, json_mode=json_mode, check=check, stop=stop,
                    temperature=temperature, seed=seed, top_p=top_p, top_k=top_k)[0]


def call_choices(role: Role, messages: list[BaseMessage], ctx: RunContext, n: int, *,
                 check: Callable[[Reply], None] | None = None, stop: list[str] | None = None,
                 temperature: float, seed: int, top_p: float | None = None,
                 top_k: int | None = None, label: dict | None = None) -> list[Reply]:
    """``n`` replies to one prompt: one request of ``n`` choices where the endpoint takes it.

    The prompt is read (and billed) once: the first reply's ``usage`` carries the request's prompt tokens,
    every reply its own completion tokens (:func:`choice_counts`). Choices the endpoint did not give (it
    refused ``n`` with a 400, which is remembered like a refused ``stop``; it gave one choice where it was
    asked for several, which is remembered too; or a choice was unusable: empty, or refused by ``check``)
    are asked for as requests of one choice each, with seeds ``seed + j`` for the ``j``-th reply, so an
    endpoint that honours seeds gives ``n`` different replies either way.

    Args:
        role: the agent whose chat model answers.
        messages: the conversation to send.
        ctx: the run's settings.
        n: replies wanted (>= 1); ``n = 1`` is :func:`call_role`.
        check: called on every reply; raising :class:`MalformedReply` marks it unusable.
        stop: stop sequences.
        temperature: the sampling temperature.
        seed: the seed of the request (``seed + j`` for a ``j``-th reply asked for alone).
        top_p: nucleus-sampling mass; default the run's.
        top_k: top-k cut; default the run's.
        label: what the transcript keeps of the request besides its messages (with ``ctx.log_prompts``); a
            reply asked for alone is kept with its own ``seed`` and ``n`` 1.

    Returns:
        ``n`` replies, or fewer where a one-choice request found no usable reply after its retries (at
        least one: the first request's failure raises).

    Raises:
        As :func:`call_role`, for the first request; a later one-choice request that fails is left out.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, not {n}")
    replies = _request(role, messages, ctx, n, check=check, stop=stop, temperature=temperature, seed=seed,
                       top_p=top_p, top_k=top_k, label=label)
    for j in range(len(replies), n):
        try:
            alone = {**label, "seed": seed + j, "n": 1} if label is not None else None
            replies += _request(role, messages, ctx, 1, check=check, stop=stop, temperature=temperature,
                                seed=seed + j, top_p=top_p, top_k=top_k, label=alone)
        except MalformedReply as exc:  # no reply, but its tokens were spent: the first reply books them
            replies[0].usage = add_usage(replies[0].usage, exc.usage)
    return replies


def _request(role: Role, messages: list[BaseMessage], ctx: RunContext, n: int, *, json_mode: bool = False,
             check: Callable[[Reply], None] | None = None, stop: list[str] | None = None,
             temperature: float | None = None, seed: int | None = None, top_p: float | None = None,
             top_k: int | None = None, label: dict | None = None) -> list[Reply]:
    """One request of ``n`` choices, with retries: :func:`call_role`'s body; the usable replies."""
    import openai
    import tenacity

    model = models.create_chat_model(role, ctx, temperature=temperature, seed=seed, top_p=top_p, top_k=top_k)
    base_url, model_name = getattr(model, "openai_api_base", None), getattr(model, "model_name", None)
    spent: list[TokenUsage] = []
    attempts = 0

    def send(msgs: list[BaseMessage]) -> list[AIMessage]:
        """One request; one refused for an optional parameter is sent again without it."""
        nonlocal model
        while True:
            # (rebuilt each pass: another worker, or this request's last pass, may have met a refusal;
            # chat models are cached, so this costs nothing when nothing changed)
            model = models.create_chat_model(role, ctx, temperature=temperature, seed=seed, top_p=top_p,
                                             top_k=top_k)
            sent = {name for name in ("temperature", "top_p", "seed")
                    if getattr(model, name, None) is not None}
            sent |= {name for name, asked in (("stop", stop), ("response_format", json_mode), ("n", n > 1))
                     if asked}
            sent -= models.refused_parameters(base_url, model_name)
            try:
                with request_slot(base_url, ctx.llm_slots):
                    if "n" in sent:
                        reseed = model.seed + attempts - 1 if attempts > 1 and "seed" in sent else None
                        return _several(model, msgs, n, stop if "stop" in sent else None, reseed)
                    target = (model.bind(response_format={"type": "json_object"})
                              if "response_format" in sent else model)
                    if attempts > 1 and "seed" in sent:
                        # an endpoint that honours the seed would repeat an empty or truncated completion
                        target = target.bind(seed=model.seed + attempts - 1)
                    return [target.invoke(msgs, stop=stop) if "stop" in sent else target.invoke(msgs)]
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                parameter = refused_parameter(exc)
                if parameter not in sent:  # (None included) it refuses something else: the run stops
                    raise
                if models.refuse_parameter(base_url, model_name, parameter):
                    _log.warning("%s refuses the %r parameter for model %s (%s); "
                                 "its requests go on without it", base_url, parameter, model_name,
                                 _one_line(exc))

    def attempt(msgs: list[BaseMessage]) -> list[Reply]:
        nonlocal attempts
        attempts += 1
        try:
            messages_back = send(msgs)
        except openai.APIResponseValidationError as exc:
            raise MalformedReply(f"unreadable response ({_one_line(exc)})") from exc
        except openai.APIError:
            raise
        except openai.LengthFinishReasonError as exc:
            # json_mode: the client's parser refuses a cut-off reply
            messages_back = [_cut_off(exc.completion)]
        except (openai.OpenAIError, *_UNREADABLE) as exc:  # e.g. ContentFilterFinishReasonError
            raise MalformedReply(f"unreadable response ({_one_line(exc)})") from exc
        if n > 1 and len(messages_back) == 1 and models.refuse_parameter(base_url, model_name, "n"):
            _log.warning("%s gave one choice where %d were asked for (model %s); its requests ask for one "
                         "choice each", base_url, n, model_name)
        replies = [_to_reply(role, msgs, m) for m in messages_back]
        if len(replies) > 1:
            reported = replies[0].usage[role]["completion"]
            counts = choice_counts(base_url, [r.text for r in replies], reported)
            for i, (reply, count) in enumerate(zip(replies, counts, strict=True)):
                prompt = reply.usage[role]["prompt"] if i == 0 else 0
                reply.usage = {role: {"prompt": prompt, "completion": count}}
        spent.extend(r.usage for r in replies)
        if ctx.log_prompts:
            for reply in replies:
                transcript.record(ctx.run_dir, role, attempts, msgs, reply.text, reply.usage, reply.truncated,
                                  label)
        usable, problem = [], None
        for reply in replies:
            try:
                if not reply.text.strip():
                    raise MalformedReply("empty completion", text=reply.text)
                if check is not None:
                    check(reply)
                usable.append(reply)
            except MalformedReply as exc:
                problem = problem or exc
        if not usable:
            raise problem
        return usable

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type((*_retryable(), MalformedReply)),
        stop=tenacity.stop_after_attempt(ctx.llm.max_retries + 1), reraise=True,
        wait=tenacity.wait_exponential(multiplier=ctx.llm.retry_wait_s, max=MAX_WAIT_S)
        + tenacity.wait_random(0, ctx.llm.retry_wait_s))
    started = time.perf_counter()

    def book(ok: bool) -> float:
        seconds = time.perf_counter() - started
        counts = _sum(spent).get(role, {})
        note_call(LLMCall(role=role, prompt=counts.get("prompt", 0), completion=counts.get("completion", 0),
                          seconds=round(seconds, 3), attempts=attempts, ok=ok))
        return seconds

    try:
        replies = retrying(attempt, messages)
    except MalformedReply as exc:
        exc.role, exc.base_url, exc.attempts, exc.usage = role, base_url, attempts, _sum(spent)
        book(False)
        raise
    except openai.APIConnectionError as exc:  # timeouts included
        raise EndpointUnavailable(base_url, role, _connection_problem(exc), attempts) from exc
    except openai.APIStatusError as exc:
        detail = re.sub(r"^Error code: \d+ - ", "", " ".join(str(exc.message).split()))[:200]
        raise EndpointUnavailable(base_url, role, f"HTTP {exc.status_code}: {detail}", attempts) from exc
    seconds = book(True)
    # the first reply carries every attempt's tokens but the other usable choices' completions
    total = _sum(spent)[role]
    others = sum(r.usage[role]["completion"] for r in replies[1:])
    replies[0].usage = {role: {"prompt": total["prompt"], "completion": total["completion"] - others}}
    for reply in replies:
        reply.seconds = seconds
    return replies


def _several(model, msgs: list[BaseMessage], n: int, stop: list[str] | None,
             seed: int | None) -> list[AIMessage]:
    """The ``n`` choices of one request to a ChatOpenAI ``model`` (LangChain's ``generate``)."""
    extra = {"seed": seed} if seed is not None else {}
    result = model.generate([msgs], stop=stop, n=n, **extra)
    return [g.message for g in result.generations[0]]

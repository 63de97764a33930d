"""One agent call: messages in, text and token usage out, with retries on transient errors."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from contextevolve.llm import models
from contextevolve.memory.records import Role, TokenUsage

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from contextevolve.graph.context import RunContext

CHARS_PER_TOKEN = 3.5
"""Characters per token used for budget estimates (measured ~3.2-3.8 for Qwen's tokenizer on
Python and English); only for composing within a budget, never for reported usage."""


def estimate_tokens(text: str) -> int:
    """Rough token count of ``text`` (ceil(chars / 3.5)); reported usage comes from the endpoint."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _retryable() -> tuple[type[BaseException], ...]:
    import openai

    return (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)


@dataclass
class Reply:
    """An agent's answer: ``text``, ``usage`` as ``{role: {prompt, completion}}``, and whether it was
    cut off at the completion-token cap (``truncated``)."""

    text: str
    usage: TokenUsage = field(default_factory=dict)
    truncated: bool = False


def call_role(role: Role, messages: list[BaseMessage], ctx: RunContext, *, json_mode: bool = False) -> Reply:
    """Send ``messages`` to ``role``'s chat model and return its :class:`Reply`.

    ``json_mode`` asks for ``response_format={"type": "json_object"}`` (the embedded server
    refuses ``json_schema``); callers still parse tolerantly. Connection, rate-limit and 5xx
    errors are retried ``ctx.max_retries`` times with exponential backoff and jitter; other
    errors propagate (a dead endpoint stops the run, which ``--resume`` continues).
    """
    model = models.create_chat_model(role, ctx)
    runnable = model.bind(response_format={"type": "json_object"}) if json_mode else model
    if ctx.max_retries > 0:
        runnable = runnable.with_retry(retry_if_exception_type=_retryable(),
                                       stop_after_attempt=ctx.max_retries + 1, wait_exponential_jitter=True)
    message = runnable.invoke(messages)
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

"""Counting tokens: the budget estimate, and the completion tokens of each choice of a request.

Reported usage always comes from the endpoint; these count where it says too little: :func:`estimate_tokens`
only to compose within a budget, :func:`choice_counts` for a request of several choices whose endpoint
reports one choice's completion (llama.cpp's server).
"""

from __future__ import annotations

import math

CHARS_PER_TOKEN = 3.5
"""Characters per token used for budget estimates; only for composing within a budget, never for reported
usage (why this value: docs/decisions/chars-per-token.md)."""
def estimate_tokens(text: str) -> int:
    """Rough token count of ``text`` (ceil(chars / 3.5)); reported usage comes from the endpoint."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def choice_counts(base_url: str | None, texts: list[str], reported: int) -> list[int]:
    """Completion tokens of each of one request's choices, ``texts``, whose usage says ``reported``.

    An OpenAI-compatible endpoint reports the sum over the choices: it is shared out in proportion to their
    lengths (largest remainder), so the counts add up to what it bills. llama.cpp's server reports one
    choice's: a report no larger than about one choice's estimate (:func:`estimate_tokens`) is taken for
    that, and each choice is counted with the endpoint's tokenizer (``POST /tokenize``, llama.cpp's), else
    estimated.
    """
    if len(texts) == 1:
        return [reported]
    estimates = [estimate_tokens(t) for t in texts]
    if reported <= ONE_CHOICE * max(estimates):
        return tokenized(base_url, texts) or estimates
    weights = [max(len(t), 1) for t in texts]
    shares = [reported * w / sum(weights) for w in weights]
    counts = [int(s) for s in shares]
    for i in sorted(range(len(texts)), key=lambda i: counts[i] - shares[i])[:reported - sum(counts)]:
        counts[i] += 1
    return counts


ONE_CHOICE = 1.5
"""A request's reported completion tokens up to this many times its longest choice's estimate are one
choice's count, not the sum over its choices (:func:`choice_counts`): the estimate is within this factor."""


def tokenized(base_url: str | None, texts: list[str]) -> list[int] | None:
    """Each of ``texts`` counted by the tokenizer of the llama.cpp server at ``base_url``, or None.

    None when there is no endpoint or it has no ``/tokenize`` (any other server).
    """
    import httpx

    if not base_url:
        return None
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        with httpx.Client(timeout=10) as client:
            replies = [client.post(f"{root}/tokenize", json={"content": text}) for text in texts]
            return [len(r.raise_for_status().json()["tokens"]) for r in replies]
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None

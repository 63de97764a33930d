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

    Each choice is counted with the endpoint's tokenizer (:func:`tokenized`, llama.cpp's ``POST /tokenize``)
    where those counts add up to more than the report: llama.cpp's server reports one choice's completion
    for a request of several. Otherwise the report is the sum over the choices (OpenAI's usage) and is
    shared out in proportion to their lengths (largest remainder), so the counts add up to what it bills.
    """
    if len(texts) == 1:
        return [reported]
    counted = tokenized(base_url, texts)
    if counted is not None and sum(counted) > reported:
        return counted
    weights = [max(len(t), 1) for t in texts]
    shares = [reported * w / sum(weights) for w in weights]
    counts = [int(s) for s in shares]
    for i in sorted(range(len(texts)), key=lambda i: counts[i] - shares[i])[:reported - sum(counts)]:
        counts[i] += 1
    return counts


_NO_TOKENIZER: set[str] = set()
"""Endpoints (roots of ``/tokenize``) that answered it with an error or an unreadable body once."""


def tokenized(base_url: str | None, texts: list[str]) -> list[int] | None:
    """Each of ``texts`` counted by the tokenizer of the llama.cpp server at ``base_url``, or None.

    None when there is no endpoint, it did not answer, or it has no ``/tokenize`` (any other server: then it
    is not asked again).
    """
    import httpx

    if not base_url:
        return None
    root = base_url.rstrip("/").removesuffix("/v1")
    if root in _NO_TOKENIZER:
        return None
    try:
        with httpx.Client(timeout=10) as client:
            replies = [client.post(f"{root}/tokenize", json={"content": text}) for text in texts]
            return [len(r.raise_for_status().json()["tokens"]) for r in replies]
    except (httpx.HTTPStatusError, ValueError, KeyError, TypeError):  # no llama.cpp tokenizer there
        _NO_TOKENIZER.add(root)
        return None
    except httpx.HTTPError:  # unreachable or slow this time: asked again next time
        return None

"""Tolerant parsing of LLM replies that were asked for JSON (small models wrap, truncate or decorate it)."""

from __future__ import annotations

import json
import re


def parse_json_object(text: str) -> dict | None:
    """The first JSON object found in ``text`` (fences, prose and trailing junk tolerated), or None."""
    cleaned = re.sub(r"```(?:json)?", "", text)
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", cleaned):
        try:
            value, _ = decoder.raw_decode(cleaned, match.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


_SENTENCE_END = re.compile(r"(?<!\.)[.!?](?:[\"')\]]*)(?=\s|$)")
"""A sentence's end: ``.``, ``!`` or ``?`` (not an ellipsis) before a space or the end of the text."""


_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.")
"""Words ending in a full stop that do not end a sentence (for :func:`sentences`)."""


def sentences(text: str) -> list[str]:
    """``text``'s sentences, whitespace collapsed.

    Each ends at :data:`_SENTENCE_END` but not after one of :data:`_ABBREVIATIONS`; a last one without an
    end is kept as it is, e.g. ``"It sorts. It packs"`` ->
    ``["It sorts.", "It packs"]``.
    """
    text = " ".join(text.split())
    found, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        if text[:match.end()].lower().endswith(_ABBREVIATIONS):
            continue
        found.append(text[start:match.end()].strip())
        start = match.end()
    tail = text[start:].strip()
    return [s for s in found if s] + ([tail] if tail else [])


def ends_sentence(text: str) -> bool:
    """Whether ``text`` ends where a sentence ends (:data:`_SENTENCE_END`)."""
    return bool(text) and any(m.end() == len(text.rstrip()) for m in _SENTENCE_END.finditer(text.rstrip()))


def clip_to_sentence(text: str, max_chars: int, *, truncated: bool = False) -> str:
    """``text`` (whitespace collapsed) ending on a sentence boundary within ``max_chars``.

    A reply that fits and was not cut off (``truncated`` = finish_reason "length") is kept as it
    is. Otherwise it is cut after the last full sentence (``.``, ``!`` or ``?`` before a space or
    the end) that fits; with no full sentence at all, after the last whole word that fits, with a
    full stop added. ``max_chars`` is the cap of the result, characters.
    """
    text = " ".join(text.split())
    if len(text) <= max_chars and not truncated:
        return text
    head = text[:max_chars + 1]
    ends = [m.end() for m in _SENTENCE_END.finditer(head) if m.end() <= max_chars]
    if ends:
        return head[:ends[-1]]
    words = head[:max_chars].rsplit(" ", 1)[0] if len(text) > max_chars else text
    return words.rstrip(",;:- ") + "." if words else ""

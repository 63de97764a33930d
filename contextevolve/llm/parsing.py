"""Tolerant parsing of LLM replies that were asked for JSON (small models wrap, truncate or
decorate it)."""

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

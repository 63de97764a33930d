"""Seeded offline tables with the character of ADRS's five LLM-SQL datasets.

ADRS's real tables (movies, beer reviews, BIRD, PDMX, products) are not reachable offline; these
mimic their shape: repeated categorical values with Zipf-skewed frequencies, columns functionally
dependent on others, a few long free-text columns, over a seeded pseudo-word vocabulary. Built with
NumPy's ``RandomState`` and cached as JSON (:mod:`contextevolve.tasks.datacache`); the tables:
docs/tasks.md, *LLM-SQL prefix reuse*.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np

from contextevolve.tasks.datacache import cached_json

VERSION = "v3"
_SYLLABLES = ("ka ri to mo na le su vi de ran bel cor tan mis har pol gen fra lu ste "
              "qua zen dor pi ser no ba ti ell ost ver mar ca lo ne sa gra").split()


class Column(NamedTuple):
    """How one column is generated.

    kind: ``cat`` (``cardinality`` values of 1-3 words, Zipf ``zipf_s`` frequencies),
    ``derived`` (a function of column ``source`` with probability 1 − ``noise``, else a
    random value of its own ``cardinality``), ``text`` (``words`` = (min, max) words;
    one text per value of ``source`` when set, like a movie synopsis repeated on
    each of its reviews, else a fresh text per row).
    """

    name: str
    kind: str
    cardinality: int = 0
    zipf_s: float = 1.0
    source: str = ""
    noise: float = 0.0
    words: tuple[int, int] = (0, 0)


class TableSpec(NamedTuple):
    """One table: name, seed, row count and columns (in the table's original order)."""

    name: str
    seed: int
    rows: int
    columns: tuple[Column, ...]


SPECS = (
    TableSpec("movies", 11, 1200, (
        Column("movie_title", "cat", 400, 0.7), Column("genre", "derived", 20, source="movie_title"),
        Column("director", "derived", 250, source="movie_title"),
        Column("year", "derived", 70, source="movie_title"),
        Column("critic", "cat", 150, 1.0), Column("review_type", "cat", 2, 0.3),
        Column("rating", "cat", 10, 0.5), Column("movie_info", "text", source="movie_title", words=(40, 90)),
        Column("review", "text", words=(8, 25)))),
    TableSpec("beer", 22, 1200, (
        Column("beer_name", "cat", 500, 0.8), Column("brewery", "derived", 120, source="beer_name"),
        Column("state", "derived", 40, source="brewery"), Column("style", "derived", 40, source="beer_name",
                                                                   noise=0.1),
        Column("abv", "derived", 60, source="beer_name"), Column("overall", "cat", 9, 0.6),
        Column("beer_info", "text", source="beer_name", words=(30, 60)),
        Column("review", "text", words=(10, 30)))),
    TableSpec("bird", 33, 1500, (
        Column("school", "cat", 1200, 0.3), Column("county", "cat", 58, 1.2),
        Column("district", "derived", 200, source="county", noise=0.5),
        Column("city", "derived", 300, source="district", noise=0.1),
        Column("zip", "derived", 400, source="city", noise=0.2), Column("school_type", "cat", 8, 1.3),
        Column("charter", "cat", 2, 1.5), Column("grades", "cat", 10, 1.0))),
    TableSpec("pdmx", 44, 1200, (
        Column("title", "cat", 900, 0.4), Column("composer", "cat", 150, 1.1),
        Column("genre", "derived", 12, source="composer", noise=0.3), Column("key", "cat", 24, 0.8),
        Column("time_signature", "cat", 6, 1.6), Column("license", "cat", 4, 1.2),
        Column("tracks", "cat", 8, 1.4), Column("notes", "text", source="title", words=(10, 30)))),
    TableSpec("products", 55, 1200, (
        Column("product_id", "cat", 500, 0.9),
        Column("product_title", "text", source="product_id", words=(4, 10)),
        Column("category", "derived", 25, source="product_id"),
        Column("sub_category", "derived", 120, source="category", noise=0.3),
        Column("brand", "derived", 200, source="product_id"),
        Column("price", "derived", 300, source="product_id"),
        Column("description", "text", source="product_id", words=(30, 80)), Column("rating", "cat", 5, 0.8),
        Column("review", "text", words=(8, 30)))),
)


def _vocabulary(rng: np.random.RandomState, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES, size=rng.randint(1, 4))))
    return sorted(words)


def _zipf(rng: np.random.RandomState, n: int, s: float, size: int) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1) ** s
    return rng.choice(n, size=size, p=p / p.sum())


def _phrases(rng: np.random.RandomState, vocab: list[str], n: int, label: str) -> list[str]:
    if label in ("year", "abv", "price", "zip", "rating", "overall", "tracks"):
        return [str(v) for v in rng.choice(np.arange(10, 10 + 20 * n), size=n, replace=False)]
    return [" ".join(vocab[i] for i in rng.randint(len(vocab), size=rng.randint(1, 4))).title()
            + f" {label[:3]}{k}" * (k % 3 == 0) for k in range(n)]


def _build(spec: TableSpec) -> dict:
    rng = np.random.RandomState(spec.seed)
    vocab = _vocabulary(rng, 3000)
    vocab = [vocab[i] for i in rng.permutation(len(vocab))]  # word frequency independent of spelling
    word_p = 1.0 / np.arange(1, len(vocab) + 1) ** 1.05
    word_p /= word_p.sum()
    values: dict[str, list[str]] = {}
    for col in spec.columns:
        if col.kind == "text":
            def text() -> str:
                k = rng.randint(col.words[0], col.words[1] + 1)
                return " ".join(vocab[i] for i in rng.choice(len(vocab), size=k, p=word_p)).capitalize() + "."
            if col.source:  # one text per value of the source column (a movie's synopsis)
                texts: dict[str, str] = {}
                values[col.name] = [texts[v] if v in texts else texts.setdefault(v, text())
                                    for v in values[col.source]]
            else:
                values[col.name] = [text() for _ in range(spec.rows)]
            continue
        domain = _phrases(rng, vocab, col.cardinality, col.name)
        if col.kind == "cat":
            values[col.name] = [domain[i] for i in _zipf(rng, col.cardinality, col.zipf_s, spec.rows)]
        else:
            mapping: dict[str, str] = {}
            out = []
            for v in values[col.source]:
                if v not in mapping:
                    mapping[v] = domain[rng.randint(col.cardinality)]
                out.append(domain[rng.randint(col.cardinality)] if rng.random_sample() < col.noise
                           else mapping[v])
            values[col.name] = out
    names = [c.name for c in spec.columns]
    return {"name": spec.name, "columns": names,
            "rows": [[values[n][r] for n in names] for r in range(spec.rows)]}


@cache
def tables() -> tuple[dict, ...]:
    """The five tables: each ``{"name", "columns": [str], "rows": [[str, ...], ...]}`` (do not mutate)."""
    return tuple(cached_json("llm_sql", f"{VERSION}-{spec.name}-{spec.seed}", lambda spec=spec: _build(spec))
                 for spec in SPECS)

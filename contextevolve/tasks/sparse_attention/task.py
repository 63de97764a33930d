"""Sparse attention task: description, the trusted grader and its metrics (lower is better).

One call per captured layer. Per head and query the candidate keeps keys S, optionally weighted
w_j ≥ 0, and o_S = Σ_{j∈S} w_j e^{s_j} v_j / Σ_{j∈S} w_j e^{s_j} is scored against the grader's
float64 dense output. ``density`` = kept / causally allowed keys; ``error`` = mean of
min(1, ‖o_S − o‖ / ‖o‖), an empty or all-zero-weight row counting 1; ``combined_score`` =
(density + error) / 2. A failed layer counts 1 and 1; a rejected program scores ``worst_score``.
Details: docs/tasks.md, *Sparse attention*.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from contextevolve.evaluation.arrays import ArraySpec, parse_npy
from contextevolve.tasks.base import Call, CallResult, CandidateRun, EvalJob, Evaluation, MetricSpec, Task
from contextevolve.tasks.sparse_attention.capture import (
    NUM_QUERIES,
    NUM_TOKENS,
    attention_inputs,
    layer_files,
)

HARNESS = "contextevolve.tasks.sparse_attention.harness"
ENTRY = "select_keys"
CASE_TIMEOUT_S = 20.0
"""Limit of one layer's call, seconds (enforced by the supervisor)."""


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
    kept = mask.astype(np.float64)
    if weights is not None:  # o_S is invariant to a row's scale: divide by its top kept weight (no overflow)
        kept *= weights.astype(np.float64)
        top = kept.max(axis=2, keepdims=True)
        kept /= np.where(top > 0, top, 1.0)
    sparse_p = dense_p * kept
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
Score = (density + error) / 2; LOWER is better. Density and error weigh the same: keeping more keys
lowers the error but raises the density, and pays only if the error falls by more than the density
rises. One call per layer; keep each call < {CASE_TIMEOUT_S:g} s:
a call that raises or overruns counts density 1 and error 1 for its layer.
"""


class _Invalid(Exception):
    """A contract violation found while grading; its message is the reason."""


def _layer_outputs(layer: int, call: CallResult, shape: tuple[int, int, int],
                   positions: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The mask (and weights) one successful call returned, parsed and checked; raises :class:`_Invalid`."""
    problem = Task.refusal(call.value)
    if problem:
        raise _Invalid(f"layer {layer}: {problem}")
    names = set(call.blobs)
    if "mask.npy" not in names or not names <= {"mask.npy", "weights.npy"}:
        raise _Invalid(f"layer {layer}: expected output arrays mask.npy (and weights.npy), got "
                       f"{sorted(str(n)[:40] for n in names)[:6]}")
    try:
        mask = parse_npy(call.blobs["mask.npy"], ArraySpec("mask", "b", shape))
        weights = (parse_npy(call.blobs["weights.npy"], ArraySpec("weights", "f", shape))
                   if "weights.npy" in names else None)
    except ValueError as exc:
        raise _Invalid(f"layer {layer}: {exc}") from None
    problem = check_outputs(mask, weights, shape, positions)
    if problem:
        raise _Invalid(f"layer {layer}: {problem}")
    return mask, weights


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
        """One call per captured layer; its inputs are that layer's Q, K, V and the query positions.

        Raises:
            CaptureError: only when the attention inputs cannot be built (not the candidate's fault).
        """
        layers = attention_inputs()["queries"].shape[0]
        return EvalJob(harness=HARNESS, entry=ENTRY, calls=[
            Call(fn="select", blobs=layer_files(layer), timeout_s=CASE_TIMEOUT_S) for layer in range(layers)])

    def smoke_refusal(self, value: object) -> str:
        """The harness's own refusal of the returned arrays (shape, dtype, ...), as :meth:`Task.refusal`."""
        return Task.refusal(value)

    def grade_run(self, run: CandidateRun) -> Evaluation:
        """Validate the masks and recompute density and error with our own inputs (see :meth:`grade`)."""
        return self.grade(run.calls, attention_inputs())

    def grade(self, calls: Sequence[CallResult], data: Mapping[str, np.ndarray]) -> Evaluation:
        """Score one call per layer of ``data``; never raises.

        ``data`` holds ``queries`` [L, H, Q, d], ``keys`` / ``values`` [L, Hkv, T, d] and
        ``query_positions`` [Q]; a failed call counts density 1 and error 1 (module doc).
        """
        q, k, v, pos = data["queries"], data["keys"], data["values"], data["query_positions"]
        if len(calls) != q.shape[0]:
            return self.rejected("invalid", f"the sandbox reported {len(calls)} calls, expected {q.shape[0]}")
        shape = (q.shape[1], q.shape[2], k.shape[2])
        errors, kept, allowed, lines, failures = [], 0, 0, [], []
        try:
            for layer, call in enumerate(calls):
                n_allowed = int((np.arange(shape[2])[None, :] <= pos[:, None]).sum()) * shape[0]
                if call.status != "ok":
                    errors.append(np.ones(shape[:2]))
                    kept, allowed = kept + n_allowed, allowed + n_allowed
                    failures.append(f"layer {layer}: {call.status}: {call.error}"[:300])
                    lines.append(f"layer {layer}: {call.status} (counts density 1, error 1)")
                    continue
                mask, weights = _layer_outputs(layer, call, shape, pos)
                rel, n_kept, n_allowed = attention_error(q[layer], k[layer], v[layer], pos, mask, weights)
                errors.append(rel)
                kept, allowed = kept + n_kept, allowed + n_allowed
                lines.append(f"layer {layer}: density {n_kept / n_allowed:.4f}, error {rel.mean():.4f}")
        except _Invalid as exc:
            return self.rejected("invalid", str(exc), diagnostics=f"Invalid output: {exc}")
        if len(failures) == len(calls):
            return self.rejected("failed", f"every select_keys call failed; first: {failures[0]}"[:500],
                                 diagnostics="\n".join(failures[:3]))
        density, error = kept / allowed, float(np.mean(errors))
        return Evaluation(status="ok", metrics={"density": density, "error": error},
                          combined_score=(density + error) / 2, diagnostics="\n".join(lines + failures[:2]))

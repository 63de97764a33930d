"""EPLB task: description, the trusted grader and its metrics.

The maps computed on window i are scored on window i+1, unseen by the call: ``balancedness`` =
Σ_layers mean slot load / Σ_layers max slot load, averaged over the pairs;
``speed`` = min(1, 0.02 / mean supervisor-measured seconds per call); ``combined_score`` =
(balancedness + 0.1 · speed) / 2. A warm-up call comes first, neither graded nor timed. A failed
window counts 0 and ``CASE_TIMEOUT_S``; broken maps make the program ``invalid``. Checks:
docs/tasks.md, *Expert-parallel load balancing*; why: docs/decisions/eplb-speed.md.
"""

from __future__ import annotations

from statistics import fmean

import numpy as np

from contextevolve.evaluation.arrays import ArraySpec, parse_npy
from contextevolve.tasks.base import Call, CallResult, CandidateRun, EvalJob, Evaluation, MetricSpec, Task
from contextevolve.tasks.eplb.traces import (
    NUM_EXPERTS,
    NUM_GPUS,
    NUM_GROUPS,
    NUM_LAYERS,
    NUM_NODES,
    NUM_REPLICAS,
    load_windows,
    warmup_npy,
    window_npy,
)

HARNESS = "contextevolve.tasks.eplb.harness"
ENTRY = "rebalance_experts"
CASE_TIMEOUT_S = 20.0
"""Limit of one rebalance call, seconds (enforced by the supervisor); a failed call counts this long."""
WARMUP_CALLS = 1
"""Calls before the scored ones (a synthetic load; not graded, not timed)."""
OUTPUT_SPECS = (ArraySpec("phy2log", "iu", (NUM_LAYERS, NUM_REPLICAS)),
                ArraySpec("log2phy", "iu", (NUM_LAYERS, NUM_EXPERTS, (1, NUM_REPLICAS))),
                ArraySpec("logcnt", "iu", (NUM_LAYERS, NUM_EXPERTS)))
"""What each returned map must be (``<name>.npy`` among the call's output blobs)."""


def score(balancedness: float, speed: float) -> float:
    """Combined LB score: (balancedness + 0.1 · speed) / 2 (the paper's Table 1 weighting, see module doc)."""
    return (balancedness + 0.1 * speed) / 2


def balancedness(load: np.ndarray, phy2log: np.ndarray, logcnt: np.ndarray) -> float:
    """Σ_layers mean(slot load) / Σ_layers max(slot load) for loads ``[L, E]`` under a valid mapping."""
    slot_load = (np.take_along_axis(load.astype(np.float64), phy2log, 1)
                 / np.take_along_axis(logcnt, phy2log, 1))
    return float(slot_load.mean(axis=1).sum() / slot_load.max(axis=1).sum())


def check_maps(phy2log: np.ndarray, log2phy: np.ndarray, logcnt: np.ndarray) -> str:
    """Why the three maps are inconsistent or break the contract; empty when valid."""
    shapes = {"phy2log": (phy2log, 2), "log2phy": (log2phy, 3), "logcnt": (logcnt, 2)}
    for name, (arr, ndim) in shapes.items():
        if arr.dtype.kind not in "iu" or arr.ndim != ndim:
            return f"{name} must be an integer tensor with {ndim} dimensions, got {arr.dtype} {arr.shape}"
    if phy2log.shape != (NUM_LAYERS, NUM_REPLICAS):
        return f"phy2log has shape {phy2log.shape}, expected ({NUM_LAYERS}, {NUM_REPLICAS})"
    if logcnt.shape != (NUM_LAYERS, NUM_EXPERTS):
        return f"logcnt has shape {logcnt.shape}, expected ({NUM_LAYERS}, {NUM_EXPERTS})"
    if log2phy.shape[:2] != (NUM_LAYERS, NUM_EXPERTS) or log2phy.shape[2] < 1:
        return f"log2phy has shape {log2phy.shape}, expected ({NUM_LAYERS}, {NUM_EXPERTS}, X)"
    if phy2log.min() < 0 or phy2log.max() >= NUM_EXPERTS:
        return "phy2log holds ids that are not logical experts"
    counts = np.stack([np.bincount(row, minlength=NUM_EXPERTS) for row in phy2log])
    if counts.min() < 1:
        layer, expert = np.argwhere(counts == 0)[0]
        return f"logical expert {expert} of layer {layer} has no replica"
    if not np.array_equal(counts, logcnt):
        return "logcnt does not match the replica counts in phy2log"
    width = log2phy.shape[2]
    if width < logcnt.max():
        return f"log2phy lists {width} slots per expert but an expert has {logcnt.max()} replicas"
    valid = np.arange(width) < logcnt[..., None]
    if np.any(log2phy[valid] < 0):
        return "log2phy must list logcnt slots per expert followed by -1 padding"
    # a real EPLB consumer tells a slot from padding by the value -1, so any other negative is wrong
    padding = log2phy[~valid]
    if np.any(padding != -1):
        return (f"log2phy must pad with exactly -1 after each expert's logcnt slots, "
                f"found {int(padding[padding != -1][0])}")
    slots = np.where(valid, log2phy, 0)
    if slots.max() >= NUM_REPLICAS:
        return "log2phy holds slot ids beyond num_replicas"
    owner = np.take_along_axis(phy2log, slots.reshape(NUM_LAYERS, -1), 1).reshape(slots.shape)
    if not np.all(owner[valid] == np.broadcast_to(np.arange(NUM_EXPERTS)[None, :, None], slots.shape)[valid]):
        return "log2phy and phy2log disagree on which expert a slot holds"
    layer_of = np.broadcast_to(np.arange(NUM_LAYERS)[:, None, None], slots.shape)[valid]
    seen = np.bincount(layer_of * NUM_REPLICAS + slots[valid], minlength=NUM_LAYERS * NUM_REPLICAS)
    if seen.max() != 1 or seen.min() != 1:
        return "log2phy must list every slot exactly once"
    return ""


DESCRIPTION = f"""\
Expert-parallel load balancing (DeepSeek EPLB) for a Mixture-of-Experts model: {NUM_LAYERS} layers x
{NUM_EXPERTS} logical experts, {NUM_REPLICAS} physical expert slots per layer, {NUM_GROUPS} expert groups,
{NUM_NODES} nodes, {NUM_GPUS} GPUs ({NUM_REPLICAS // NUM_GPUS} slots per GPU; slot p is on \
GPU p // {NUM_REPLICAS // NUM_GPUS}).
Implement `rebalance_experts(weight, num_replicas, num_groups, num_nodes, num_gpus) ->
(phy2log, log2phy, logcnt)` with torch int64 tensors: weight [layers, experts] is the token load per
logical expert; phy2log [layers, num_replicas] the logical expert in each slot; log2phy [layers, experts, X]
the slots of each expert padded with -1; logcnt [layers, experts] replicas per expert (every expert >= 1).
Each call gets one window of load; its mapping is scored on the next window, which it never sees: each
expert's load splits evenly over its replicas; balancedness = sum over layers of mean slot load / \
sum of max slot load.
speed = min(1, 0.02 / mean seconds of the call). Score = (balancedness + 0.1 * speed) / 2; higher
is better. Loads are skewed (Zipf-like), drift over time and burst. Keep each call well under \
{CASE_TIMEOUT_S:g} s:
a call that raises or overruns counts with balancedness 0 and {CASE_TIMEOUT_S:g} s.
"""


class _Invalid(Exception):
    """A contract violation found while grading; its message is the reason."""


def _window_maps(index: int, call: CallResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three maps one successful call returned, parsed and checked; raises :class:`_Invalid`."""
    problem = Task.refusal(call.value)
    if problem:
        raise _Invalid(f"window {index}: {problem}")
    expected = {f"{spec.name}.npy" for spec in OUTPUT_SPECS}
    if set(call.blobs) != expected:
        raise _Invalid(f"window {index}: expected output arrays {sorted(expected)}, got "
                       f"{sorted(str(n)[:40] for n in call.blobs)[:6]}")
    try:
        maps = tuple(parse_npy(call.blobs[f"{spec.name}.npy"], spec) for spec in OUTPUT_SPECS)
    except ValueError as exc:
        raise _Invalid(f"window {index}: {exc}") from None
    problem = check_maps(*maps)
    if problem:
        raise _Invalid(f"window {index}: {problem}")
    return maps


class Eplb(Task):
    """ADRS EPLB: balance MoE expert load over GPUs, fast."""

    name = "eplb"
    title = "Expert-parallel load balancing (LB)"
    description = DESCRIPTION
    metrics = [
        MetricSpec(name="balancedness", description="mean/max slot load on the next window (1 = perfect)"),
        MetricSpec(name="speed", description="min(1, 0.02 / mean seconds of rebalance_experts)"),
    ]
    higher_is_better = True
    score_tolerance = 5e-4
    """Score difference a child must exceed to count as better: about the speed term's change that timing
    noise makes at the initial program's speed (why this value: docs/decisions/score-tolerance.md)."""
    timeout_s = 120.0
    baseline_files = {"heuristic": "heuristic.py", "human_sota": "human_sota.py"}

    def job(self) -> EvalJob:
        """A warm-up call on a synthetic load, then one call per window but the last (input: that window)."""
        args = {"num_replicas": NUM_REPLICAS, "num_groups": NUM_GROUPS, "num_nodes": NUM_NODES,
                "num_gpus": NUM_GPUS}
        windows = len(load_windows())
        warmup = [Call(fn="rebalance", args=args, blobs={"weight.npy": warmup_npy()},
                       timeout_s=CASE_TIMEOUT_S)]
        return EvalJob(harness=HARNESS, entry=ENTRY, calls=warmup + [
            Call(fn="rebalance", args=args, blobs={"weight.npy": window_npy(i)}, timeout_s=CASE_TIMEOUT_S)
            for i in range(windows - 1)])

    def smoke_refusal(self, value: object) -> str:
        """The harness's own refusal of the returned arrays (shape, dtype, ...), as :meth:`Task.refusal`."""
        return Task.refusal(value)

    def grade_run(self, run: CandidateRun) -> Evaluation:
        """Score the returned maps against our own load windows; never raises.

        The calls' times are those the supervisor measured. The warm-up call is ignored; a failed window
        counts at its worst (module doc).
        """
        windows = load_windows()
        if len(run.calls) != WARMUP_CALLS + len(windows) - 1:
            return self.rejected("invalid", f"the sandbox reported {len(run.calls)} calls, expected "
                                 f"{WARMUP_CALLS + len(windows) - 1}")
        calls = run.calls[WARMUP_CALLS:]
        scores: list[float] = []
        times: list[float] = []
        errors: list[str] = []
        try:
            for i, call in enumerate(calls):
                if call.status != "ok":
                    scores.append(0.0)
                    times.append(CASE_TIMEOUT_S)
                    errors.append(f"window {i}: {call.status}: {call.error}"[:300])
                    continue
                phy2log, _, logcnt = _window_maps(i, call)
                scores.append(balancedness(windows[i + 1], phy2log, logcnt))
                times.append(min(float(call.seconds), CASE_TIMEOUT_S))
        except _Invalid as exc:
            return self.rejected("invalid", str(exc), diagnostics=f"Invalid mapping: {exc}")
        if len(errors) == len(calls):
            first = self.call_failures(run)[0]
            return self.rejected("failed", f"every rebalance call failed; first: {first}"[:500],
                                 diagnostics="\n".join(errors[:3]))
        seconds = fmean(times)
        bal = fmean(scores)
        speed = min(1.0, 0.02 / seconds) if seconds > 0 else 1.0
        lines = [f"balancedness per window pair: {', '.join(f'{s:.3f}' for s in scores)}"
                 + (" (a failed window counts 0)" if errors else ""),
                 f"rebalance call: mean {seconds:.3f} s over {len(times)} calls"
                 + (f" (a failed call counts {CASE_TIMEOUT_S:g} s)" if errors else "")]
        return Evaluation(status="ok", metrics={"balancedness": bal, "speed": speed},
                          combined_score=score(bal, speed), diagnostics="\n".join(lines + errors[:2]))

"""Phase 2, Navigator: roll out parent->child steps from the buffer, sample m by Δs category, ask for g.

A step is (z_p, z_c, Δs), categorised by :func:`rollout`. m steps are drawn without replacement, each from a
non-empty category drawn with probability proportional to ``RunContext.search.category_weights`` (p(Δs) of
Eq. 5), then a step in it. With no step yet the agent is not asked (docs/decisions/first-navigator-call.md);
then, and after a reply unusable through the retries, there is no guidance, as when the Navigator is ablated.
The agent is asked again only when it has something new to say (:func:`guidance_is_current`): its last
guidance for the same parent stands until :data:`GUIDANCE_REFRESH_STEPS` evaluated steps arrived, the
best changed, or a child copied its parent (a code twin: the guidance led to a copy, and reused it would
lead the same prompt to the same copy). Once the Navigator and the Sampler have spent
``search.navigator_sampler_share`` of the run's tokens, the worker's last guidance is reused whatever its
parent (:func:`~contextevolve.loop.spending.share_spent`), but not after a copy: then there is none, and
the Generator's unguided ask is the hotter one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from langgraph.runtime import Runtime

from contextevolve.graph.context import RunContext
from contextevolve.graph.state import WorkerState
from contextevolve.llm.calls import MalformedReply, call_role
from contextevolve.llm.parsing import clip_to_sentence
from contextevolve.loop.resources import memory_of, rng_for, task_of
from contextevolve.loop.spending import share_spent
from contextevolve.memory.records import ProgramRecord
from contextevolve.nodes.summarize import failure_prefix
from contextevolve.prompts import navigator as prompt
from contextevolve.tasks.base import Task

GUIDANCE_CHARS = 600
"""Guidance longer than this, or cut off at the Navigator's token cap, ends at its last full sentence
that fits (a runaway reply must not flood later prompts, nor a half sentence mislead them)."""
GUIDANCE_REFRESH_STEPS = 2
"""The Navigator is asked again once this many evaluated steps (children that ran) arrived since its
guidance was written; until then its last guidance is reused (it has nothing new to say). The paper asks it
every iteration."""


OUTCOME = {"failed": "failed", "timeout": "timed out", "invalid": "was invalid",
           "pending": "was never evaluated"}
"""How a step's text says what happened to a program that did not run to a score."""


@dataclass
class Step:
    """One trajectory step parent -> child with signed metric deltas and its category."""

    parent: ProgramRecord
    child: ProgramRecord
    deltas: dict[str, float]
    category: str

    def delta_text(self) -> str:
        """Δs per metric when both programs ran; otherwise which side failed.

        A failed program has no metrics, only placeholders such as the worst value, so deltas against
        them would only mislead.
        """
        if self.category == "no_effect":
            return f"no effect: every result equals {self.child.behavioural_twin_of}'s"
        if self.child.status == "ok" and self.parent.status == "ok":
            # float noise and -0.0 print as +0, as the category reads them (no change)
            return ", ".join(f"Δ{k} {v if abs(v) > 1e-12 else 0.0:+.4g}" for k, v in self.deltas.items())
        if self.parent.status == "ok":
            return f"the child {OUTCOME.get(self.child.status, self.child.status)}, no metrics"
        if self.child.status == "ok":
            return (f"the parent {OUTCOME.get(self.parent.status, self.parent.status)}; the child runs "
                    f"(score {self.child.combined_score:.4g})")
        return f"both {self.parent.status}/{self.child.status}, no metrics"


def program_summary(record: ProgramRecord) -> str:
    """``score X`` for a program that ran, else its status."""
    return f"score {record.combined_score:.4g}" if record.status == "ok" else record.status


def shown_abstract(record: ProgramRecord) -> str:
    """The abstract without the failure prefix whose status :func:`program_summary` already says.

    The prefix is :func:`~contextevolve.nodes.summarize.failure_prefix`'s.
    """
    return record.abstract.removeprefix(failure_prefix(record.status))


def rollout(records: list[ProgramRecord], task: Task) -> list[Step]:
    """All parent->child steps among committed ``records``, categorised by Δs.

    Δs per metric is signed so that positive means better (the paper writes Δs = s_parent − s_child;
    lower-is-better metrics are flipped so one sign reads the same everywhere). The category is
    ``improvement`` (no metric worse, one better), ``decline`` (no metric better, one worse; failed
    children land here) or ``mixed`` (both, or no change): the paper's consistent improvement, consistent
    decline and mixed fluctuation; a behavioural twin's step is ``no_effect`` (its change altered no result:
    evidence of its own, not a fluctuation).
    """
    by_id = {r.id: r for r in records}
    steps = []
    for child in records:
        parent = by_id.get(child.parent_id or "")
        if parent is None:
            continue
        deltas = {}
        for spec in task.metrics:
            delta = child.metrics.get(spec.name, 0.0) - parent.metrics.get(spec.name, 0.0)
            deltas[spec.name] = spec.oriented(delta)
        if child.status == "ok" and child.behavioural_twin_of:
            category = "no_effect"
        elif (child.status == "ok") != (parent.status == "ok"):
            # A failed side has no real metrics: the status change decides the category.
            category = "improvement" if child.status == "ok" else "decline"
        else:
            better = any(d > 1e-12 for d in deltas.values())
            worse = any(d < -1e-12 for d in deltas.values())
            category = "mixed" if better == worse else ("improvement" if better else "decline")
        steps.append(Step(parent, child, deltas, category))
    return steps


UNEVALUATED = frozenset({"twin", "edit", "endpoint", "evaluator"})
"""Failure kinds of children that never ran, whose steps say nothing about a direction of change."""


def copies(records: list[ProgramRecord]) -> int:
    """Children among ``records`` that copied a stored program (code twins: both asks wrote it back)."""
    return sum(1 for r in records if r.failure_kind == "twin")


def evaluated_steps(records: list[ProgramRecord]) -> int:
    """Children among ``records`` that ran (a score, an invalid output, a crash, a timeout, a pre-check)."""
    return sum(1 for r in records if r.parent_id is not None and r.failure_kind not in UNEVALUATED)


def guidance_is_current(state: WorkerState, evaluated: int, best_id: str, copied: int) -> bool:
    """Whether the worker's last guidance still says all the Navigator would (so it is reused).

    It does while it was written for the same parent, fewer than :data:`GUIDANCE_REFRESH_STEPS`
    evaluated steps arrived since, the best program is the same and no child copied its parent since
    (``copied``: :func:`copies` now); never when none was written.
    """
    return (bool(state.written_guidance) and state.written_after >= 0
            and evaluated - state.written_after < GUIDANCE_REFRESH_STEPS and best_id == state.written_best_id
            and state.parent_id == state.written_parent_id and copied <= state.written_copies)


def sample_steps(steps: list[Step], m: int, weights: dict[str, float], rng: random.Random) -> list[Step]:
    """Draw up to ``m`` steps without replacement, category first by ``weights``, then uniformly."""
    bins: dict[str, list[Step]] = {}
    for step in steps:
        bins.setdefault(step.category, []).append(step)
    chosen: list[Step] = []
    while len(chosen) < m:
        live = [c for c in bins if bins[c] and weights.get(c, 0) > 0]
        if not live:
            break
        category = rng.choices(live, weights=[weights[c] for c in live])[0]
        chosen.append(bins[category].pop(rng.randrange(len(bins[category]))))
    return chosen


def navigate(state: WorkerState, runtime: Runtime[RunContext]) -> dict:
    """Produce the directional guidance g for this iteration (empty when the Navigator is ablated).

    The worker's last guidance is reused while it is current (:func:`guidance_is_current`), and whatever
    its parent once the Navigator and the Sampler have spent their share of the run's tokens, unless a
    child copied its parent since it was written (then the guidance is empty).
    """
    ctx = runtime.context
    if not ctx.ablations.navigator_enabled:
        return {"guidance": "", "trajectory_ids": []}
    task, memory = task_of(ctx), memory_of(ctx)
    parent = memory.buffer.require(state.parent_id)
    committed = memory.buffer.committed()
    every_step = rollout(committed, task)
    if not every_step:
        return {"guidance": "", "trajectory_ids": []}
    evaluated, best = evaluated_steps(committed), memory.buffer.best_by(task.better)
    best_id, copied = (best.id if best else ""), copies(committed)
    current = guidance_is_current(state, evaluated, best_id, copied)
    if current or (state.written_guidance and share_spent(ctx)):
        if copied > state.written_copies:  # over the share after a copy: the unguided (hotter) ask
            return {"guidance": "", "trajectory_ids": []}
        return {"guidance": state.written_guidance, "trajectory_ids": list(state.written_trajectory_ids)}
    steps = sample_steps(every_step, ctx.search.num_trajectories, ctx.search.category_weights,
                         rng_for(ctx, state.iteration, "navigate"))
    metric_names = ", ".join(f"{m.name} {'higher' if m.higher_is_better else 'lower'} is better"
                             for m in task.metrics)
    programs = {}
    for step in steps:
        for record in (step.parent, step.child):
            if record.id != parent.id:
                programs.setdefault(record.id, {"summary": program_summary(record),
                                                "abstract": shown_abstract(record)})
    messages = prompt.messages(
        task.description, metric_names,
        {"id": parent.id, "summary": program_summary(parent), "abstract": shown_abstract(parent)},
        [{"category": s.category.replace("_", " "), "parent": s.parent.id, "child": s.child.id,
          "delta": s.delta_text()} for s in steps],
        programs, ctx.ablations.guidance_variant)
    try:
        reply = call_role("navigator", messages, ctx, seed=ctx.worker_seed(state.worker))
    except MalformedReply as exc:
        return {"guidance": "", "trajectory_ids": [s.child.id for s in steps],
                "iteration_usage": exc.usage}
    guidance = clip_to_sentence(reply.text, GUIDANCE_CHARS, truncated=reply.truncated)
    trajectory = [s.child.id for s in steps]
    return {"guidance": guidance, "trajectory_ids": trajectory, "iteration_usage": reply.usage,
            "written_guidance": guidance, "written_trajectory_ids": trajectory, "written_after": evaluated,
            "written_best_id": best_id, "written_parent_id": parent.id, "written_copies": copied}
